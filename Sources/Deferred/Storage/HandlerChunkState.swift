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
    @usableFromInline
    internal var rawValue: UInt

    @inlinable
    internal init(rawValue: UInt) {
        self.rawValue = rawValue
    }
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
