public import Synchronization

extension Atomic where Value == UInt {
    /// Moves the word along `transition` with a compare-and-swap loop: the one such loop in
    /// the library, which every lock-free structure runs its pure transitions through.
    ///
    /// `transition` gets the word observed and returns the word to store, or `nil` to leave
    /// the word as it is and stop. If another thread changed the word in between, the store
    /// fails and `transition` runs again with the new word, so it must be pure apart from
    /// preparing what the store publishes (a node's link, say).
    ///
    /// Every load acquires and every store acquires and releases: one ordering for all
    /// transitions keeps each proof to "the word orders everything around it". (On x86 every
    /// compare-and-swap is a full barrier anyway; elsewhere the difference is a few cycles,
    /// and only where a transition succeeds.)
    ///
    /// - Parameters:
    ///   - observed: The word the caller last saw; `nil` loads it first.
    ///   - transition: The pure step from the observed word to the next.
    /// - Returns: The word observed last (the one replaced, or the one `transition` declined)
    ///   and whether it was replaced.
    @inlinable
    @inline(__always)
    package func update(from observed: UInt? = nil, _ transition: (UInt) -> UInt?) -> (observed: UInt, updated: Bool) {
        var observed = observed ?? load(ordering: .acquiring)
        while let next = transition(observed) {
            let (exchanged, original) = compareExchange(
                expected: observed, desired: next, successOrdering: .acquiringAndReleasing, failureOrdering: .acquiring)
            if exchanged {
                return (observed, true)
            }
            observed = original
        }
        return (observed, false)
    }
}

/// An object's address as the bits of an atomic word, carrying one retain: how the library's
/// lock-free structures keep objects in a word, and the one place they touch `Unmanaged`.
///
/// Objects are aligned to 16 bytes, so the four low bits of the address are free for flags;
/// every function here takes bits whose flags the caller has cleared.
@usableFromInline
package enum RetainedBits {
    /// Retains `object` and returns its address bits.
    @inlinable
    @inline(__always)
    package static func retain(_ object: some AnyObject) -> UInt {
        UInt(bitPattern: Unmanaged.passRetained(object).toOpaque())
    }

    /// Takes back the retain that ``retain(_:)`` gave out for the object at `bits` (non-zero).
    @inlinable
    @inline(__always)
    package static func take<Object: AnyObject>(_ bits: UInt, as _: Object.Type = Object.self) -> Object {
        Unmanaged<Object>.fromOpaque(UnsafeRawPointer(bitPattern: bits).unsafelyUnwrapped).takeRetainedValue()
    }

    /// The object at `bits` (non-zero), without taking its retain: only while the word that
    /// holds the retain cannot lose it.
    @inlinable
    @inline(__always)
    package static func borrow<Object: AnyObject>(_ bits: UInt, as _: Object.Type = Object.self) -> Object {
        Unmanaged<Object>.fromOpaque(UnsafeRawPointer(bitPattern: bits).unsafelyUnwrapped).takeUnretainedValue()
    }

    /// Calls `body` with the object at `bits` (non-zero) without retaining it: only while the
    /// word that holds the retain keeps it for as long as `body` runs.
    @inlinable
    @inline(__always)
    package static func withBorrowed<Object: AnyObject, Result>(
        _ bits: UInt, as _: Object.Type = Object.self, _ body: (Object) -> Result
    ) -> Result {
        Unmanaged<Object>.fromOpaque(UnsafeRawPointer(bitPattern: bits).unsafelyUnwrapped)._withUnsafeGuaranteedRef(
            body)
    }

    /// Drops the retain of the object at `bits` (non-zero).
    @inlinable
    @inline(__always)
    package static func release<Object: AnyObject>(_ bits: UInt, as _: Object.Type) {
        Unmanaged<Object>.fromOpaque(UnsafeRawPointer(bitPattern: bits).unsafelyUnwrapped).release()
    }
}

/// An optional strong reference that threads exchange atomically, with a tag bit and a mark bit
/// beside it.
///
/// The slot keeps its object retained once, as address bits in one atomic word; the tag is the
/// lowest bit and the mark the next one, which an object's address never uses (objects are
/// aligned to 16 bytes). The tag belongs to the slot; the mark travels with the object. Whoever takes the object out of the slot
/// takes that retain with it, so an object is released exactly once, by its last taker or by
/// the slot's deinit.
///
/// Reading the object without taking it (``load()``) is safe only while the slot cannot lose
/// it, which the callers guarantee: they read slots whose object, once stored, stays until the
/// slot is destroyed.
@usableFromInline
internal struct AtomicReference<Object: AnyObject>: ~Copyable {
    @usableFromInline
    internal let bits: Atomic<UInt>

    @inlinable
    internal static var tagBit: UInt { 1 }

    @inlinable
    internal static var markBit: UInt { 2 }

    @inlinable
    internal static var addressMask: UInt { ~(tagBit | markBit) }

    /// Creates a slot holding `object` (retained), marked if `marked`, with the tag set if
    /// `tagged`.
    @inlinable
    internal init(_ object: Object? = nil, marked: Bool = false, tagged: Bool = false) {
        bits = Atomic(Self.retainedBits(object) | (marked ? Self.markBit : 0) | (tagged ? Self.tagBit : 0))
    }

    /// Creates a slot holding `object`, retained once (a borrowed argument is not copied first).
    @inlinable
    internal init(holding object: borrowing Object) {
        bits = Atomic(RetainedBits.retain(object))
    }

    deinit {
        Self.release(bits.load(ordering: .acquiring))
    }

    /// The object in the slot, and whether the tag is set.
    ///
    /// Only for a slot whose object is never taken while the caller reads it.
    @inlinable
    internal func load() -> (object: Object?, isTagged: Bool) {
        let current = bits.load(ordering: .acquiring)
        return (Self.borrow(current), current & Self.tagBit != 0)
    }

    /// Calls `body` with the object in the slot, borrowed (not retained, as ``load()`` would),
    /// and returns what it returns; `nil` without calling it if the slot holds none.
    ///
    /// Only for a slot whose object is never taken while `body` runs, and whose object's own
    /// type the caller knows: `Kind` (see ``ChainNode/linked(_:)``).
    @inlinable
    internal func withLoaded<Kind: AnyObject, Result>(as _: Kind.Type, _ body: (Kind) -> Result) -> Result? {
        let address = bits.load(ordering: .acquiring) & Self.addressMask
        guard address != 0 else {
            return nil
        }
        return RetainedBits.withBorrowed(address, as: Kind.self, body)
    }

    /// The object in the slot, borrowed, unless it is marked or the tag is set.
    ///
    /// Only for a reader that whoever takes the object waits for before releasing it (the
    /// deadline ledger, under its lock: see ``DeadlineLedger``). Sequentially consistent, like
    /// the ledger's marking of the slot's owner and the owner's check after taking.
    @inlinable
    internal func loadUnmarked() -> Object? {
        let current = bits.load(ordering: .sequentiallyConsistent)
        return current & (Self.tagBit | Self.markBit) != 0 ? nil : Self.borrow(current)
    }

    /// Whether the slot holds no object at the moment of the load; safe whoever takes it.
    @inlinable
    internal var isEmpty: Bool {
        bits.load(ordering: .relaxed) & Self.addressMask == 0
    }

    /// Stores `object` if the slot holds none, keeping the tag; returns whether it did, and whether
    /// the tag was set at that moment.
    ///
    /// On failure the caller still owns `object`.
    @inlinable
    internal func storeIfEmpty(_ object: Object) -> (stored: Bool, isTagged: Bool) {
        let new = Self.retainedBits(object)
        let (observed, stored) = bits.update { observed in
            observed & Self.addressMask == 0 ? new | observed : nil
        }
        if !stored {
            Self.release(new)
        }
        return (stored, observed & Self.tagBit != 0)
    }

    /// Stores `object`, marked if `marked`, if the slot holds none and its tag is not set.
    ///
    /// Returns whether it did; on failure the caller still owns `object`.
    @inlinable
    internal func storeIfEmptyAndUntagged(_ object: consuming Object, marked: Bool) -> Bool {
        let new = Self.retainedBits(consume object) | (marked ? Self.markBit : 0)
        let (_, stored) = bits.update { observed in
            observed == 0 ? new : nil
        }
        if !stored {
            Self.release(new)
        }
        return stored
    }

    /// Sets the tag and takes the object out, unless it is marked: a marked object stays in the
    /// slot until the slot is destroyed, and is not taken (``withLoaded(as:_:)`` reads it).
    ///
    /// One exchange; a marked object is put back at once. Meanwhile the slot reads as tagged and
    /// empty, which a reader must take as "ended before any object came": the object's owner
    /// must make that reading mean the same as finding it there. `kept` is `true` only for the
    /// call that set the tag: a later one finds the marked object handled already.
    @inlinable
    @inline(__always)
    internal func tagTakingUnmarked() -> (taken: Object?, kept: Bool) {
        let observed = bits.exchange(Self.tagBit, ordering: .acquiringAndReleasing)
        if observed & Self.markBit != 0 {
            bits.store(observed | Self.tagBit, ordering: .releasing)
            return (nil, observed & Self.tagBit == 0)
        }
        return (Self.take(observed), false)
    }

    /// Takes the object out and sets the tag with a load and a store, for an owner that no other
    /// thread can be storing into or taking from the slot meanwhile; `inspect` reads the object
    /// first, borrowed, without retaining it.
    @inlinable
    internal func takeAloneAndTag(inspecting inspect: (Object) -> Bool) -> (object: Object?, inspected: Bool) {
        let observed = bits.load(ordering: .acquiring)
        bits.store(Self.tagBit, ordering: .releasing)
        let address = observed & Self.addressMask
        guard address != 0 else {
            return (nil, false)
        }
        let inspected = RetainedBits.withBorrowed(address, as: Object.self, inspect)
        return (RetainedBits.take(address, as: Object.self), inspected)
    }

    /// Replaces the object with `object`, marked if `marked`, unless the tag is set; returns
    /// whether it did and the object taken out, with its mark.
    ///
    /// If the tag is set, the caller still owns `object`.
    ///
    /// Sequentially consistent: an owner that switches an attempt's source here then loads the
    /// attempt's demand word for the *tracked* bit, which the deadline ledger sets before it
    /// loads this slot (the store-buffering shape, which acquiring and releasing does not order;
    /// see ``DeadlineLedger``). On x86 and ARM it is the same instruction.
    @inlinable
    internal func exchangeUnlessTagged(
        _ object: Object?, marked: Bool = false
    ) -> (exchanged: Bool, previous: Object?, previousMarked: Bool) {
        let new = Self.retainedBits(object) | (marked ? Self.markBit : 0)
        var observed = bits.load(ordering: .acquiring)
        while observed & Self.tagBit == 0 {
            let (exchanged, original) = bits.compareExchange(
                expected: observed, desired: new, successOrdering: .sequentiallyConsistent,
                failureOrdering: .acquiring)
            if exchanged {
                return (true, Self.take(observed), observed & Self.markBit != 0)
            }
            observed = original
        }
        Self.release(new)
        return (false, nil, false)
    }

    /// Takes the object out, with its mark, and sets the tag, so that nothing can be stored any
    /// more.
    @inlinable
    internal func takeAndTag() -> (object: Object?, isMarked: Bool) {
        let before = bits.exchange(Self.tagBit, ordering: .acquiringAndReleasing)
        return (Self.take(before), before & Self.markBit != 0)
    }

    /// Takes the object out, keeping the tag; for the last owner of the slot.
    @inlinable
    internal func take() -> Object? {
        Self.take(bits.exchange(bits.load(ordering: .relaxed) & Self.tagBit, ordering: .acquiringAndReleasing))
    }

    @inlinable
    internal static func retainedBits(_ object: Object?) -> UInt {
        // Not `map`: unoptimized, a generic call on `Object?` looks up the optional's metadata.
        guard let object else {
            return 0
        }
        return RetainedBits.retain(object)
    }

    @inlinable
    internal static func borrow(_ bits: UInt) -> Object? {
        let address = bits & addressMask
        return address == 0 ? nil : RetainedBits.borrow(address, as: Object.self)
    }

    @inlinable
    internal static func take(_ bits: UInt) -> Object? {
        let address = bits & addressMask
        return address == 0 ? nil : RetainedBits.take(address, as: Object.self)
    }

    @inlinable
    internal static func release(_ bits: UInt) {
        _ = take(bits)
    }
}

/// A value as an object: what an ``AtomicReference`` holds (what a pending timer delivers or
/// starts: a delayed result, a timeout's failure, a retry's plan, which whoever takes it out of
/// the slot first gets, and a cancellation can drop), and the cancellation error the stages of a
/// chain share (``CancellationErrorBox``).
@usableFromInline
internal final class ValueBox<Value: Sendable>: Sendable {
    @usableFromInline internal let value: Value
    @usableFromInline internal init(_ value: Value) { self.value = value }
}

/// A decoded atomic word: the one integer a lock-free structure changes as a whole, with the
/// meaning that the conforming type's extensions give its bits.
///
/// ``StorageState``, ``DemandState``, ``AttemptFlags`` and ``HandlerChunkState`` are words of
/// this kind. They only compute; the type that owns the atomic performs the operations and asks
/// its word what each party must do.
///
/// Each word is a concrete struct rather than one generic struct with a tag: an unoptimized
/// build (a debug build of the library, or a sanitizer's) looks up a generic struct's metadata
/// at every use, which cost a third of the processor time of a deep chain in a debug build.
@usableFromInline
internal protocol StateWord: Hashable, Sendable {
    /// The integer the atomic holds.
    associatedtype Raw: FixedWidthInteger & Sendable

    /// The raw word.
    var rawValue: Raw { get set }

    /// Decodes `rawValue`.
    init(rawValue: Raw)
}

extension StateWord {
    /// Whether any bit of `mask` is set.
    @inlinable
    internal func has(_ mask: Raw) -> Bool {
        rawValue & mask != 0
    }
}
