public import Synchronization

/// The decoded control word of a ``HandlerChunk``: the pure half of how registrants and the
/// fill share a chunk's slots.
///
/// | bits  | meaning                                                                   |
/// |-------|---------------------------------------------------------------------------|
/// | 0–31  | *ready*: slot *i* holds a handler that its registrant has finished writing |
/// | 32    | *closed*: the fill has taken the handlers that were ready                  |
/// | 33–63 | *claims*: how many registrants asked for a slot (those past the capacity got none) |
///
/// A registrant claims slot *i* with one atomic add, writes its handler, then sets *ready*
/// bit *i* with one atomic OR. The fill, once the value is published, closes the chunk with
/// one atomic OR and runs the handlers whose *ready* bit it saw. Exactly one of a registrant's
/// OR and the fill's OR sees the other's bit, so each handler runs exactly once: by the fill
/// if it was ready when the chunk closed, else by its registrant.
@frozen
@usableFromInline
internal struct HandlerChunkState: StateWord {
    @usableFromInline internal var rawValue: UInt
    @inlinable internal init(rawValue: UInt) { self.rawValue = rawValue }
}

extension HandlerChunkState {
    /// The most slots a chunk has: one *ready* bit each.
    @inlinable internal static var maximumCapacity: Int { 32 }
    @inlinable internal static var readyBits: UInt { (1 << 32) - 1 }
    @inlinable internal static var closedBit: UInt { 1 << 32 }
    @inlinable internal static var claimShift: UInt { 33 }

    /// What one claim adds to the word.
    @inlinable internal static var oneClaim: UInt { 1 << claimShift }

    /// A new chunk whose creator holds slot 0 and has written it.
    @inlinable
    internal static var holdingFirstSlot: HandlerChunkState { HandlerChunkState(rawValue: oneClaim | 1) }

    /// The bit of slot `index` in the *ready* bits.
    @inlinable
    internal static func readyBit(_ index: Int) -> UInt { 1 << UInt(index) }

    /// How many registrants asked for a slot.
    @inlinable
    internal var claims: Int { Int(truncatingIfNeeded: rawValue >> Self.claimShift) }

    /// Whether the fill has closed the chunk.
    @inlinable
    internal var isClosed: Bool { has(Self.closedBit) }

    /// The slots whose handlers were written, as bits.
    @inlinable
    internal var readySlots: UInt { rawValue & Self.readyBits }

    /// The indices of the slots whose handlers were written, lowest first.
    @inlinable
    internal var readyIndices: ReadyIndices { ReadyIndices(bits: readySlots) }

    /// The indices of a word's set *ready* bits, lowest first.
    @frozen
    @usableFromInline
    internal struct ReadyIndices: Sequence, IteratorProtocol {
        @usableFromInline internal var bits: UInt
        @inlinable internal init(bits: UInt) { self.bits = bits }

        @inlinable
        internal mutating func next() -> Int? {
            guard bits != 0 else {
                return nil
            }
            defer { bits &= bits &- 1 }
            return bits.trailingZeroBitCount
        }
    }

    // MARK: Transitions

    /// What a registrant whose claiming add returned this word does, in a chunk of `capacity`
    /// slots.
    @inlinable
    internal func claimOutcome(capacity: Int) -> Claim {
        if isClosed { return .runNow }
        return claims < capacity ? .slot(claims) : .full
    }

    /// Who runs a handler whose registrant's OR of its *ready* bit returned this word: the
    /// registrant if the chunk closed first (the fill did not see the handler), the fill
    /// otherwise.
    @inlinable
    internal var readyHandlerRunner: ReadyHandlerRunner { isClosed ? .registrant : .fill }

    /// The outcome of a claim.
    @frozen
    @usableFromInline
    internal enum Claim: Equatable {
        /// The slot at this index is the registrant's to write.
        case slot(Int)
        /// Every slot is taken: the registrant needs a new chunk.
        case full
        /// The value is published and the fill has closed the chunk: run the handler now.
        case runNow
    }

    /// Who runs a handler written into a slot.
    @frozen
    @usableFromInline
    internal enum ReadyHandlerRunner: Equatable {
        /// The fill will, or did: it saw the *ready* bit when it closed the chunk.
        case fill
        /// The registrant: the chunk closed before the handler was ready.
        case registrant
    }
}

/// Handlers added after a storage's inline slot was taken, many to a block: one chunk of a
/// stack that the storage's state word points to, newest chunk first.
///
/// A registrant puts its handler into the newest chunk's next free slot (see
/// ``HandlerChunkState`` for the protocol), so adding a handler allocates nothing until the
/// chunk is full; then the registrant pushes a new chunk with twice the slots, up to
/// ``HandlerChunkState/maximumCapacity``. A fan-out of *n* handlers takes about
/// log₂ *n* + *n* / 32 allocations instead of *n*.
///
/// A chunk lives as long as its storage: a registrant reaches the newest chunk through the
/// state word without retaining it, which is sound because the storage it holds keeps every
/// chunk until the storage's last owner releases it. Each handler is moved out of its slot
/// when it runs or is dropped, so a filled storage keeps only empty slots.
///
/// The chunk is one allocation: its tail holds the control word (a ``HandlerChunkState``),
/// then the slots, each a handler's worth of words, initialized by the registrant that claims
/// it and moved out, exactly once, by whoever runs or drops the handler (the fill, the
/// registrant, or the storage's last owner). So when the chunk goes, no slot holds anything,
/// and its deinitializer, which is never specialized, has no generic value to destroy.
@usableFromInline
internal final class HandlerChunk<Value: Sendable>: ManagedBuffer<HandlerChunkHeader, Atomic<UInt>>, StackNode {
    /// How many words of the tail one slot takes.
    @inlinable
    internal static var wordsPerSlot: Int {
        MemoryLayout<Handler<Value>>.stride / MemoryLayout<Atomic<UInt>>.stride
    }

    /// Makes a chunk of `capacity` slots whose first slot holds `handler`, ready.
    @inlinable
    internal static func make(capacity: Int, holding handler: consuming Handler<Value>) -> HandlerChunk {
        assert(
            MemoryLayout<Handler<Value>>.stride % MemoryLayout<Atomic<UInt>>.stride == 0
                && MemoryLayout<Handler<Value>>.alignment <= MemoryLayout<Atomic<UInt>>.alignment,
            "a handler fills whole words of the tail")
        // `create` allocates an instance of the class it is called on; the checked cast costs
        // little once per chunk.
        let chunk =
            create(minimumCapacity: 1 + capacity * wordsPerSlot) { _ in HandlerChunkHeader(capacity: capacity) }
            as! HandlerChunk
        var handler = Optional(handler)
        chunk.withUnsafeMutablePointerToElements { words in
            words.initialize(to: Atomic(HandlerChunkState.holdingFirstSlot.rawValue))
            slot(0, of: words).initialize(to: handler.take()!)
        }
        return chunk
    }

    deinit {
        // Every slot is empty by now (see above): only the control word is left.
        _ = withUnsafeMutablePointerToElements { words in words.deinitialize(count: 1) }
    }

    /// The slot at `index`, in the tail that starts at `words`.
    @inlinable
    @inline(__always)
    internal static func slot(_ index: Int, of words: UnsafeMutablePointer<Atomic<UInt>>) -> UnsafeMutablePointer<
        Handler<Value>
    > {
        UnsafeMutableRawPointer(words + 1 + index * wordsPerSlot).bindMemory(to: Handler<Value>.self, capacity: 1)
    }

    /// The address bits of the next older chunk, which this chunk retains, or zero.
    ///
    /// The registrant that pushes this chunk sets it; afterwards only the fill, or the last
    /// owner of the storage, touches it.
    @inlinable
    package var next: UInt {
        get { withUnsafeMutablePointerToHeader { $0.pointee.next } }
        set { withUnsafeMutablePointerToHeader { $0.pointee.next = newValue } }
    }

    /// How many registrants asked for a slot so far (those past the capacity got none).
    @usableFromInline
    internal var claims: Int {
        withUnsafeMutablePointerToElements { HandlerChunkState(rawValue: $0.pointee.load(ordering: .acquiring)).claims }
    }

    /// How many slots this chunk has.
    @inlinable
    internal var slotCount: Int {
        withUnsafeMutablePointerToHeader { $0.pointee.capacity }
    }

    /// Where a handler offered to this chunk went.
    @frozen
    @usableFromInline
    internal enum Placement {
        /// Into the slot at this index: the fill runs it.
        case stored(Int)
        /// Nowhere, because every slot is taken: the caller needs a new chunk, of the capacity
        /// given.
        case full(Handler<Value>, nextCapacity: Int)
        /// Nowhere, because the value is published: the caller runs it now.
        case runNow(Handler<Value>)
    }

    /// Puts `handler` into the next free slot, unless every slot is taken or the chunk was
    /// closed by a fill.
    @inlinable
    @inline(__always)
    internal func place(_ handler: consuming Handler<Value>) -> Placement {
        // Moved into the closure through a variable, so that the handler is never copied.
        var handler = Optional(handler)
        return withUnsafeMutablePointers { header, words in
            let claimed = HandlerChunkState(
                rawValue: words.pointee.wrappingAdd(HandlerChunkState.oneClaim, ordering: .acquiringAndReleasing)
                    .oldValue)
            switch claimed.claimOutcome(capacity: header.pointee.capacity) {
            case .runNow:
                return .runNow(handler.take()!)
            case .full:
                let capacity = min(2 * header.pointee.capacity, HandlerChunkState.maximumCapacity)
                return .full(handler.take()!, nextCapacity: capacity)
            case .slot(let index):
                let slot = Self.slot(index, of: words)
                slot.initialize(to: handler.take()!)
                // Adding the bit sets it, since nobody else does; unlike an OR, an add that
                // returns the old word is one instruction on x86.
                let before = HandlerChunkState(
                    rawValue: words.pointee.wrappingAdd(
                        HandlerChunkState.readyBit(index), ordering: .acquiringAndReleasing
                    ).oldValue)
                return before.readyHandlerRunner == .registrant ? .runNow(slot.move()) : .stored(index)
            }
        }
    }

    /// Closes the chunk and runs the handlers that were ready, in the order of their slots;
    /// a handler whose registrant had not finished writing it is left to that registrant.
    ///
    /// Called by the fill that published `value`, once.
    @inlinable
    internal func runReadyHandlers(with value: Value, from source: ChainNode, in queue: inout DrainQueue) {
        withUnsafeMutablePointerToElements { words in
            for index in Self.close(words).readyIndices {
                Self.slot(index, of: words).move().run(with: value, from: source, in: &queue)
            }
        }
    }

    /// Closes the chunk and drops the handlers that were ready.
    ///
    /// Links' nodes go to `nodes` as lost; a handler whose registrant had not finished writing it
    /// is left to that registrant, which drops it. Called by the orphaning of the storage, once.
    @usableFromInline
    internal func closeAndDropReadyHandlers(to nodes: inout ReleaseStack) {
        withUnsafeMutablePointerToElements { words in
            for index in Self.close(words).readyIndices {
                Self.slot(index, of: words).move().drop(to: &nodes)
            }
        }
    }

    /// Drops every handler of an unfilled chunk, moving the nodes that links continue into
    /// `nodes` as lost: what the last owner of an unfilled storage does, when no registrant is left.
    @usableFromInline
    internal func dropHandlers(to nodes: inout ReleaseStack) {
        withUnsafeMutablePointerToElements { words in
            for index in HandlerChunkState(rawValue: words.pointee.load(ordering: .acquiring)).readyIndices {
                Self.slot(index, of: words).move().drop(to: &nodes)
            }
        }
    }

    /// Closes the chunk whose word `words` points to, and returns the word before.
    ///
    /// Only one caller ever closes a chunk (the fill, or the orphaning), so adding the bit sets it.
    @inlinable
    internal static func close(_ words: UnsafeMutablePointer<Atomic<UInt>>) -> HandlerChunkState {
        HandlerChunkState(
            rawValue: words.pointee.wrappingAdd(HandlerChunkState.closedBit, ordering: .acquiringAndReleasing).oldValue)
    }

    /// Takes back the handler of slot 0 of a chunk that was never pushed.
    @inlinable
    internal func takeFirstHandler() -> Handler<Value> {
        withUnsafeMutablePointerToElements { words in Self.slot(0, of: words).move() }
    }
}

/// The fixed part of a ``HandlerChunk``.
@frozen
@usableFromInline
internal struct HandlerChunkHeader {
    /// See ``HandlerChunk/next``.
    @usableFromInline
    internal var next: UInt = 0

    /// How many slots the chunk has.
    @usableFromInline
    internal let capacity: Int

    @inlinable
    internal init(capacity: Int) {
        self.capacity = capacity
    }
}

/// Releases the chain of chunks that starts at `head` (address bits, retained), for a storage's
/// unspecialized `deinit`: reading each chunk's link through the non-generic base class looks
/// up no chunk or chain type of the storage's value, and each chunk's own `deinit` still runs.
internal func releaseChunks(from head: UInt) {
    var bits = head
    while bits != 0 {
        let chunk = RetainedBits.take(bits, as: ManagedBuffer<HandlerChunkHeader, Atomic<UInt>>.self)
        bits = chunk.header.next
    }
}
