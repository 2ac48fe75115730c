/// How much an attempt is still needed: the pure half of ``AttemptHub``.
///
/// Every dependent that needs an attempt and can give up on it — an attempt derived from it, a
/// task awaiting `get()`, a blocking `wait` — holds one *unit* of demand while it needs it. A
/// handler added with `upon`, `uponSuccess` or `uponFailure` never gives up, so it *pins* the
/// attempt instead. When the last unit is released and nothing pinned the attempt, it is
/// cancelled: work that nobody needs any more stops. A reader that waited and gives its unit
/// back does not say the work is unwanted: it cancels only if a dependent gave up on the attempt
/// while the reader held it.
///
/// The transparent stages derived from the attempt (`map`, `recover`, `delay`…) share its hub
/// and form one *path* below it, each a level deeper than its source; a second stage derived
/// from the same attempt starts a hub of its own. The *path unit* is held by the end of the
/// path and needs every stage on it (for a moment there can be two: a stage that had released
/// its path unit, and the new stage that took a fresh one while that release was on its way); the others need the attempt itself or, for *side
/// units* (see ``SideDemand``), the stages down to a given depth. Units keep being counted once
/// the attempt has *settled* (finished otherwise than by a cancellation), because stages still
/// waiting to run need to know whether anyone wants them.
///
/// | bits   | meaning                                                                 |
/// |--------|-------------------------------------------------------------------------|
/// | 0      | *pinned*: a handler needs the attempt for good                          |
/// | 1      | *given up*: a dependent released its unit                               |
/// | 2      | *settled*: the attempt finished; demand no longer cancels it             |
/// | 3–18   | how many of the units are path units                                    |
/// | 19…    | the number of units held                                                |
/// | ``cancelled`` | the attempt was cancelled, for lack of demand or by `cancel()`; absorbing |
///
/// This type only computes; ``AttemptHub`` performs the atomic operations.
@frozen
@usableFromInline
internal struct DemandState: StateWord {
    @usableFromInline
    internal var rawValue: Int

    @inlinable
    internal init(rawValue: Int) {
        self.rawValue = rawValue
    }
}

extension DemandState {
    /// The state stored in an atomic word.
    @inlinable
    internal init(bits: UInt) {
        self.init(rawValue: Int(bitPattern: bits))
    }

    /// The state as an atomic word.
    @inlinable
    internal var bits: UInt { UInt(bitPattern: rawValue) }

    @inlinable internal static var pinnedBit: Int { 1 }
    @inlinable internal static var givenUpBit: Int { 2 }
    @inlinable internal static var settledBit: Int { 4 }
    @inlinable internal static var pathUnit: Int { 8 }
    @inlinable internal static var pathUnits: Int { 0xFFFF << 3 }
    @inlinable internal static var unit: Int { 1 << 19 }

    /// Nothing holds or pins the attempt yet.
    @inlinable
    internal static var initial: DemandState { DemandState(rawValue: 0) }

    /// The attempt was cancelled; demand no longer matters.
    @inlinable
    internal static var cancelled: DemandState { DemandState(rawValue: .min) }

    /// Whether the attempt finished or was cancelled, so that demand no longer cancels it.
    @inlinable
    internal var isFinal: Bool { isCancelled || rawValue & Self.settledBit != 0 }

    /// Whether the attempt was cancelled.
    @inlinable
    internal var isCancelled: Bool { self == .cancelled }

    /// How many units are held.
    @inlinable
    internal var units: Int { isCancelled ? 0 : rawValue >> 19 }

    /// Whether a handler that never gives up needs the attempt.
    @inlinable
    internal var isPinned: Bool { !isFinal && rawValue & Self.pinnedBit != 0 }

    /// Whether a path unit is held: every stage on the path is needed.
    @inlinable
    internal var isPathHeld: Bool { !isCancelled && rawValue & Self.pathUnits != 0 }

    /// The state after a dependent takes a unit (the path unit if `path`), or `nil` if the
    /// attempt was cancelled, in which case the dependent gets the cancellation instead.
    @inlinable
    internal func adding(path: Bool = false) -> DemandState? {
        if isCancelled { return nil }
        return DemandState(rawValue: rawValue + Self.unit + (path ? Self.pathUnit : 0))
    }

    /// The state after a dependent releases its unit (the path unit if `path`), and whether
    /// that release cancels the attempt: it was the last unit, nothing pinned the attempt, and
    /// it has not settled.
    @inlinable
    internal func releasing(path: Bool = false) -> (state: DemandState, cancels: Bool) {
        guard !isCancelled else {
            return (self, false)
        }
        let released = DemandState(rawValue: rawValue - Self.unit - (path ? Self.pathUnit : 0))
        guard !isFinal else {
            return (released, false)
        }
        if released.units == 0 && !released.isPinned {
            return (.cancelled, true)
        }
        return (DemandState(rawValue: released.rawValue | Self.givenUpBit), false)
    }

    /// A reader that held a unit while it waited gives it back: one unit fewer, cancelling only
    /// if that leaves nothing and a dependent gave up on the attempt meanwhile.
    @inlinable
    internal func returning() -> (state: DemandState, cancels: Bool) {
        guard !isCancelled else {
            return (self, false)
        }
        let returned = DemandState(rawValue: rawValue - Self.unit)
        if !isFinal && returned.units == 0 && !returned.isPinned && returned.rawValue & Self.givenUpBit != 0 {
            return (.cancelled, true)
        }
        return (returned, false)
    }

    /// The state after a handler that never gives up pins the attempt.
    @inlinable
    internal func pinning() -> DemandState {
        isFinal ? self : DemandState(rawValue: rawValue | Self.pinnedBit)
    }

    /// The state after the attempt finishes, and whether this transition is the one that
    /// finished it (a second finish, or one after a cancellation, changes nothing).
    @inlinable
    internal func finishing(cancelled: Bool) -> (state: DemandState, finishes: Bool) {
        guard !isFinal else {
            return (self, false)
        }
        return (cancelled ? .cancelled : DemandState(rawValue: rawValue | Self.settledBit), true)
    }
}

/// The state of one attempt's node that is not in its storage's state word: the pure half of
/// ``AttemptNode``.
///
/// | bit | meaning                                                                            |
/// |-----|------------------------------------------------------------------------------------|
/// | 0   | *cancelled*: the attempt was cancelled, by `cancel()`, by its source's cancellation, or for lack of demand; its success and failure callbacks no longer run |
/// | 1   | *holds a unit*: a stage holding the path unit, or a unit its handlers keep         |
/// | 2   | *pinned early*: a handler pinned an attempt before it had a hub                    |
/// | 3   | *keeps its unit*: a handler needs a derived attempt, which keeps its unit for good  |
/// | 4   | *decided cancelled*: the attempt's result is a cancellation (a late `cancel()` sets only bit 0) |
/// | 5   | *owns its hub*: set when the node is made and never changed (a root, an owner, or a stage that starts a hub of its own; a transparent node shares its source's hub) |
/// | 6   | *path taken*: the first dependent that continues the path below this attempt has come (see ``DemandState``) |
/// | 8…  | the attempt's *depth* on its hub's path: 0 for the hub's own attempt; set when the node is made |
@frozen
@usableFromInline
internal struct AttemptFlags: StateWord {
    @usableFromInline
    internal var rawValue: UInt

    @inlinable
    internal init(rawValue: UInt) {
        self.rawValue = rawValue
    }
}

/// Read a flag with ``StateWord/has(_:)``: `flags.has(AttemptFlags.holdsUnit)`.
extension AttemptFlags {
    @inlinable internal static var cancelled: UInt { 1 }
    @inlinable internal static var holdsUnit: UInt { 2 }
    @inlinable internal static var pinnedEarly: UInt { 4 }
    @inlinable internal static var keepsUnit: UInt { 8 }
    @inlinable internal static var decidedCancelled: UInt { 16 }
    @inlinable internal static var ownsHub: UInt { 32 }
    @inlinable internal static var pathTaken: UInt { 64 }

    /// The flags of a node at `depth` on its hub's path.
    @inlinable
    internal static func depth(_ depth: Int) -> UInt { UInt(depth) << 8 }

    /// The attempt's depth on its hub's path.
    @inlinable
    internal var depth: Int { Int(rawValue >> 8) }
}

/// The transitions of ``AttemptFlags`` that demand makes; ``AttemptNode`` applies them with one
/// atomic step each.
extension AttemptFlags {
    /// The flags after a dependent continuing the path below this attempt comes, and what that
    /// dependent must do (see ``PathTaking``); `nil` if another dependent took the path already.
    ///
    /// The attempt hands over the unit it holds, unless a handler keeps it.
    @inlinable
    internal func takingPath() -> (next: AttemptFlags, taking: PathTaking)? {
        guard !has(Self.pathTaken) else {
            return nil
        }
        let holds = has(Self.holdsUnit)
        let keeps = has(Self.keepsUnit)
        if holds && !keeps {
            return (AttemptFlags(rawValue: (rawValue | Self.pathTaken) & ~Self.holdsUnit), .handedOver)
        }
        return (AttemptFlags(rawValue: rawValue | Self.pathTaken), holds ? .converting(depth) : .fresh)
    }

    /// The flags after a handler pins this attempt (a stage that shares its source's demand),
    /// and whether the handler must take a side unit at this attempt's depth: the attempt
    /// handed its unit over and holds none (one that never had a unit is cancelled or decided).
    @inlinable
    internal func pinning() -> (next: AttemptFlags, takesSideUnit: Bool) {
        let takes = !has(Self.keepsUnit) && !has(Self.holdsUnit) && has(Self.pathTaken)
        return (AttemptFlags(rawValue: rawValue | Self.keepsUnit), takes)
    }

    /// The flags once the side unit a handler took is held.
    @inlinable
    internal func holdingPinnedUnit() -> AttemptFlags {
        AttemptFlags(rawValue: rawValue | Self.holdsUnit)
    }

    /// The flags after the attempt gives up the unit it holds, and that unit's depth (see
    /// ``DemandUnit``), or `nil` if it held none: the path unit while nobody took the path below,
    /// else a side unit at its depth, kept for its handlers.
    @inlinable
    internal func releasingHeldUnit() -> (next: AttemptFlags, released: Int?) {
        let next = AttemptFlags(rawValue: rawValue & ~Self.holdsUnit)
        guard has(Self.holdsUnit) else {
            return (next, nil)
        }
        return (next, has(Self.pathTaken) ? depth : DemandUnit.path)
    }
}
