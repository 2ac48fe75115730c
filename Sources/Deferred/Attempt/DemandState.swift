/// How much an attempt is still needed: the pure half of ``AttemptHub``.
///
/// Every dependent that needs an attempt and can give up on it — an attempt derived from it, a
/// task awaiting `get()`, a blocking `wait` — holds one *unit* of demand while it needs it. A
/// handler added with `upon`, `uponSuccess` or `uponFailure` never gives up, so it *pins* the
/// attempt instead. When the last unit is released and nothing pinned the attempt, it is
/// cancelled: work that nobody needs any more stops. Once the attempt has finished, demand no
/// longer matters. A reader that waited and gives its unit back does not say the work is
/// unwanted: it cancels only if a dependent gave up on the attempt while the reader held it.
///
/// | raw value                 | meaning                                            |
/// |---------------------------|----------------------------------------------------|
/// | `count << 2 \| given up << 1 \| pinned` | running: `count` units held, pinned or not; *given up* once a dependent released its unit |
/// | ``cancelled``             | cancelled for lack of demand, or by `cancel()`     |
/// | ``settled``               | finished: demand no longer matters                 |
///
/// This type only computes; ``AttemptHub`` performs the atomic operations.
@frozen
@usableFromInline
internal struct DemandState: Equatable, Sendable {
    /// The raw state word.
    @usableFromInline
    internal var rawValue: Int

    @inlinable
    internal init(rawValue: Int) {
        self.rawValue = rawValue
    }

    /// Nothing holds or pins the attempt yet.
    @inlinable
    internal static var initial: DemandState { DemandState(rawValue: 0) }

    /// The attempt was cancelled; demand no longer matters.
    @inlinable
    internal static var cancelled: DemandState { DemandState(rawValue: .min) }

    /// The attempt finished otherwise; demand no longer matters.
    @inlinable
    internal static var settled: DemandState { DemandState(rawValue: .min + 1) }

    /// Whether the attempt finished or was cancelled, so that demand no longer matters.
    @inlinable
    internal var isFinal: Bool { rawValue < 0 }

    /// Whether the attempt was cancelled.
    @inlinable
    internal var isCancelled: Bool { self == .cancelled }

    /// How many units are held while the attempt runs.
    @inlinable
    internal var units: Int { isFinal ? 0 : rawValue >> 2 }

    /// Whether a handler that never gives up needs the attempt.
    @inlinable
    internal var isPinned: Bool { !isFinal && rawValue & 1 != 0 }

    /// The state after a dependent takes a unit, or `nil` if the attempt was cancelled, in which
    /// case the dependent gets the cancellation instead.
    ///
    /// After the attempt settled, taking a unit changes nothing.
    @inlinable
    internal func adding() -> DemandState? {
        if isCancelled { return nil }
        if isFinal { return self }
        return DemandState(rawValue: rawValue + 4)
    }

    /// The state after a dependent releases its unit, and whether that release cancels the
    /// attempt: it was the last unit, and nothing pinned the attempt.
    @inlinable
    internal func releasing() -> (state: DemandState, cancels: Bool) {
        guard !isFinal else {
            return (self, false)
        }
        let released = DemandState(rawValue: (rawValue - 4) | 2)
        if released.units == 0 && !released.isPinned {
            return (.cancelled, true)
        }
        return (released, false)
    }

    /// A reader that held a unit while it waited gives it back: one unit fewer, cancelling only
    /// if that leaves nothing and a dependent gave up on the attempt meanwhile.
    @inlinable
    internal func returning() -> (state: DemandState, cancels: Bool) {
        guard !isFinal else {
            return (self, false)
        }
        let returned = DemandState(rawValue: rawValue - 4)
        if returned.units == 0 && !returned.isPinned && returned.rawValue & 2 != 0 {
            return (.cancelled, true)
        }
        return (returned, false)
    }

    /// The state after a handler that never gives up pins the attempt.
    @inlinable
    internal func pinning() -> DemandState {
        isFinal ? self : DemandState(rawValue: rawValue | 1)
    }

    /// The state after the attempt finishes, and whether this transition is the one that
    /// finished it (a second finish, or one after a cancellation, changes nothing).
    @inlinable
    internal func finishing(cancelled: Bool) -> (state: DemandState, finishes: Bool) {
        guard !isFinal else {
            return (self, false)
        }
        return (cancelled ? .cancelled : .settled, true)
    }
}

/// The state of one attempt's node that is not in its storage's state word: the pure half of
/// ``AttemptNode``.
///
/// | bit | meaning                                                                            |
/// |-----|------------------------------------------------------------------------------------|
/// | 0   | *cancelled*: the attempt was cancelled, by `cancel()`, by its source's cancellation, or for lack of demand; its success and failure callbacks no longer run |
/// | 1   | *holds a unit*: a derived attempt that holds one unit of demand on its hub         |
/// | 2   | *pinned early*: a handler pinned an attempt before it had a hub                    |
/// | 3   | *keeps its unit*: a handler needs a derived attempt, which keeps its unit for good  |
/// | 4   | *decided cancelled*: the attempt's result is a cancellation (a late `cancel()` sets only bit 0) |
/// | 5   | *owns its hub*: set when the node is made and never changed (a root or an owner; a transparent node shares its source's hub) |
@frozen
@usableFromInline
internal struct AttemptFlags: Equatable, Sendable {
    @usableFromInline
    internal var rawValue: UInt8

    @inlinable
    internal init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    @inlinable internal static var cancelled: UInt8 { 1 }
    @inlinable internal static var holdsUnit: UInt8 { 2 }
    @inlinable internal static var pinnedEarly: UInt8 { 4 }
    @inlinable internal static var keepsUnit: UInt8 { 8 }
    @inlinable internal static var decidedCancelled: UInt8 { 16 }
    @inlinable internal static var ownsHub: UInt8 { 32 }

    /// Whether the attempt was cancelled.
    @inlinable
    internal var isCancelled: Bool { rawValue & Self.cancelled != 0 }

    /// Whether the attempt holds a unit of demand on its hub.
    @inlinable
    internal var holdsUnit: Bool { rawValue & Self.holdsUnit != 0 }

    /// Whether a derived attempt keeps its unit for its handlers instead of handing it over.
    @inlinable
    internal var keepsUnit: Bool { rawValue & Self.keepsUnit != 0 }

    /// Whether the attempt's result is a cancellation, not a result that a later `cancel()`
    /// only withdrew the callbacks of.
    @inlinable
    internal var isDecidedCancelled: Bool { rawValue & Self.decidedCancelled != 0 }

    /// Whether the hub in the node's slot is its own.
    @inlinable
    internal var ownsHub: Bool { rawValue & Self.ownsHub != 0 }

    /// Whether a handler pinned the attempt before it had a hub.
    @inlinable
    internal var isPinnedEarly: Bool { rawValue & Self.pinnedEarly != 0 }
}
