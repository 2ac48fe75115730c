/// The state of one attempt's node beside its storage's word: whether it was cancelled, and how
/// much its consumers still need it.
///
/// The pure half of ``AttemptNode``'s demand: it only computes, and the node applies each event
/// with one atomic step.
///
/// Every consumer that needs an attempt and can give up on it holds one *unit* of its demand
/// while it needs it: an attempt derived from it (which also holds the attempt itself, see
/// ``AttemptNode/upstream``), a task awaiting `get()`, a blocking `wait`. A handler added with
/// `upon`, `uponSuccess` or `uponFailure` never gives up, so it *pins* the attempt instead. When
/// the last unit is released and nothing pinned the attempt, it *stops*: its producer is told
/// (its cancel handlers run), it lets go of what it holds upstream, and it is decided as
/// cancelled if its failure type can say so. A reader that waited and gives its unit back does
/// not say the work is unwanted: it stops the attempt only if a consumer gave up on it while
/// the reader held its unit.
///
/// Demand ends once, with whichever comes first: the attempt *settles* (it is decided otherwise
/// than by a stop, or orphaned) or it *stops* (for lack of demand, or by `cancel()`). After
/// that, units are neither taken nor counted: a consumer that comes later needs nothing
/// upstream.
///
/// | bits | meaning |
/// |------|---------|
/// | 0    | *cancelled*: `cancel()`, or a decision as cancelled; the success and failure callbacks no longer run |
/// | 1    | *decided cancelled*: the result is a cancellation (a late `cancel()` sets only bit 0) |
/// | 2    | *pinned*: a handler needs the attempt for good |
/// | 3    | *given up*: a consumer released its unit |
/// | 4    | *settled*: decided (or orphaned) before it stopped; demand no longer matters |
/// | 5    | *stopped*: nobody needs it any more, or it was cancelled; its producer was told |
/// | 6    | *holds alone*: set when the node is made; nothing but its own end of demand takes what it holds while it is referenced (a step or a delay: no weak reference revives it, no owner switches what it holds) |
/// | 7    | *tracked*: the ``DeadlineLedger`` keeps a record of it; whoever takes a unit, pins it or ends its demand tells the ledger |
/// | 8, 9 | why it stopped (see ``CancellationReason``): bit 8 a cancellation, bit 9 a deadline; neither, nobody needs it |
/// | 10…  | the number of units held |
@frozen
@usableFromInline
internal struct DemandState: StateWord {
    @usableFromInline internal var rawValue: UInt
    @inlinable internal init(rawValue: UInt) { self.rawValue = rawValue }
}

/// Read a flag with ``StateWord/has(_:)``: `state.has(DemandState.pinned)`.
extension DemandState {
    @inlinable internal static var cancelled: UInt { 1 }
    @inlinable internal static var decidedCancelled: UInt { 2 }
    @inlinable internal static var pinned: UInt { 4 }
    @inlinable internal static var givenUp: UInt { 8 }
    @inlinable internal static var settled: UInt { 16 }
    @inlinable internal static var stopped: UInt { 32 }
    @inlinable internal static var holdsAlone: UInt { 64 }
    @inlinable internal static var tracked: UInt { 128 }
    @inlinable internal static var stoppedByCancel: UInt { 256 }
    @inlinable internal static var stoppedByDeadline: UInt { 512 }
    @inlinable internal static var unitShift: UInt { 10 }
    @inlinable internal static var unit: UInt { 1 << unitShift }

    /// Nothing holds or pins the attempt yet.
    @inlinable
    internal static var initial: DemandState { DemandState(rawValue: 0) }

    /// An attempt that has its result from the start.
    @inlinable
    internal static var finished: DemandState { DemandState(rawValue: settled) }

    /// Whether demand has ended: the attempt settled or stopped.
    @inlinable
    internal var isFinal: Bool { has(Self.settled | Self.stopped) }

    /// Whether the attempt stopped: its producer was told that nobody needs it.
    @inlinable
    internal var isStopped: Bool { has(Self.stopped) }

    /// How many units consumers hold.
    @inlinable
    internal var units: UInt { rawValue >> Self.unitShift }

    /// Why the attempt stopped, once it has.
    @inlinable
    internal var stopReason: CancellationReason {
        if has(Self.stoppedByCancel) {
            return .cancelled
        }
        return has(Self.stoppedByDeadline) ? .deadlinePassed : .unneeded
    }

    /// The bits that record `reason` (none for ``CancellationReason/unneeded``).
    @inlinable
    internal static func bits(of reason: CancellationReason) -> UInt {
        switch reason {
        case .unneeded: 0
        case .cancelled: stoppedByCancel
        case .deadlinePassed: stoppedByDeadline
        }
    }
}

/// What the event that ended an attempt's demand must do; see ``AttemptNode/endDemand(_:)``.
@usableFromInline
internal enum DemandEnd {
    /// Tell nobody: the attempt settled. Its producer's cancel handlers are released unrun.
    case settle
    /// Tell the producer to stop: run its cancel handlers, and decide the attempt as cancelled
    /// if it is still pending.
    case stop
}

/// How far a stop got without running anyone's code (see ``AttemptNode/claimStop()``); its
/// claimer finishes it with ``AttemptNode/finish(_:to:)``.
@usableFromInline
internal enum StopClaim {
    /// Nothing is left to do: no stop, or another party decided the attempt first.
    case none
    /// The attempt's fill is claimed, and it is marked cancelled: publish the cancellation.
    case claimed
    /// The attempt cannot fail by cancellation: tell its producer to stop.
    case tellProducer
}

/// The events. Each returns the next state (the one given, if nothing changes) and what the
/// caller must do.
extension DemandState {
    /// A consumer takes a unit; `nil` if demand has ended, in which case the consumer holds
    /// nothing (it gets the result, or the cancellation, from its link).
    @inlinable
    internal func taking() -> DemandState? {
        isFinal ? nil : DemandState(rawValue: rawValue + Self.unit)
    }

    /// A consumer releases its unit; whether that stops the attempt: it was the last unit and
    /// nothing pinned it.
    ///
    /// `reason` is what made the consumer leave (see ``bits(of:)``).
    @inlinable
    internal func releasing(reason: UInt = 0) -> (next: DemandState, stops: Bool) {
        guard !isFinal else {
            return (self, false)
        }
        let released = rawValue - Self.unit
        if released >> Self.unitShift == 0 && released & Self.pinned == 0 {
            return (DemandState(rawValue: released | Self.stopped | reason), true)
        }
        return (DemandState(rawValue: released | Self.givenUp), false)
    }

    /// A reader gives back the unit it held while it waited: it stops the attempt only if that
    /// was the last unit, nothing pinned it, and a consumer gave up meanwhile.
    @inlinable
    internal func givingBack() -> (next: DemandState, stops: Bool) {
        guard !isFinal else {
            return (self, false)
        }
        let returned = rawValue - Self.unit
        if returned >> Self.unitShift == 0 && returned & Self.pinned == 0 && returned & Self.givenUp != 0 {
            return (DemandState(rawValue: returned | Self.stopped), true)
        }
        return (DemandState(rawValue: returned), false)
    }

    /// A handler that never gives up pins the attempt.
    @inlinable
    internal func pinning() -> DemandState {
        isFinal ? self : DemandState(rawValue: rawValue | Self.pinned)
    }

    /// The attempt is decided (or orphaned) by the caller that claimed its fill: demand ends by
    /// settling, unless the attempt stopped first; `cancelled` marks the result a cancellation.
    ///
    /// Returns whether it settled now (`false`: it had stopped, and its producer was told).
    @inlinable
    internal func settling(cancelled: Bool) -> (next: DemandState, settles: Bool) {
        let marks = cancelled ? Self.cancelled | Self.decidedCancelled : 0
        if isStopped {
            return (DemandState(rawValue: rawValue | marks), false)
        }
        return (DemandState(rawValue: rawValue | Self.settled | marks), true)
    }

    /// `cancel()`: sets *cancelled*, and stops the attempt unless its demand has ended; returns
    /// whether it stopped now.
    @inlinable
    internal func cancelling() -> (next: DemandState, stops: Bool) {
        guard !isFinal else {
            return (DemandState(rawValue: rawValue | Self.cancelled), false)
        }
        return (DemandState(rawValue: rawValue | Self.cancelled | Self.stopped | Self.stoppedByCancel), true)
    }

    /// The attempt is decided as cancelled by the caller that stopped it (and claimed its
    /// fill): marked cancelled, and final.
    @inlinable
    internal func decidingCancelled() -> DemandState {
        DemandState(rawValue: rawValue | Self.stopMarks)
    }

    /// What ``decidingCancelled()`` sets, for the shell's one atomic OR.
    @inlinable
    internal static var stopMarks: UInt { cancelled | decidedCancelled | stopped }
}
