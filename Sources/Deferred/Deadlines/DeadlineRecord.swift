/// What the deadline ledger knows of one attempt: its own deadline, the deadlines of its
/// consumers, and what it counts as on its source.
///
/// The pure half of ``DeadlineLedger``: plain arithmetic on one record, which the ledger applies
/// under its lock.
///
/// An attempt's *needed-until* is the latest instant at which a current consumer will still take
/// its result. Each consumer holds a unit of the attempt's demand (see ``DemandState``); a
/// *bounded* consumer also counts here, with its instant. The needed-until is an instant only
/// when every unit is bounded and no handler pinned the attempt: then it is the latest instant
/// counted since the bounded count was last zero (which may be later than exact, never earlier);
/// otherwise it is *none*. A consumer counts as bounded once it has taken its unit and stops
/// counting before it releases it, so the bounded count never exceeds the units: the two are
/// equal only when every unit is bounded.
///
/// A record is a class so that the ledger changes it in place and drops it, with what it
/// references, outside its lock.
@usableFromInline
internal final class DeadlineRecord {
    /// The attempt's own deadline, set on it (`deadline(at:)`, a `timeout`).
    internal var own: DeadlineMark?

    /// The clock of this attempt's deadlines: its own deadline's, or its first bounded
    /// consumer's.
    ///
    /// A consumer on another clock counts as unbounded.
    internal var clock: ObjectIdentifier?

    /// How many units of the attempt's demand bounded consumers hold.
    internal var bounded = 0

    /// The latest instant of the bounded consumers counted since ``bounded`` was last zero.
    internal var latest: DeadlineMark?

    /// What this attempt counts as on ``countedOn`` (`nil`: unbounded, not counted).
    internal var counted: DeadlineMark?

    /// The node this attempt holds units of as the ledger last saw it: its source (or a join's
    /// held inputs), where it counts as ``counted``; kept, strongly, until that changes.
    internal var countedOn: ChainNode?

    /// The producer's observers, each called with each new needed-until.
    internal var observers: [@Sendable (DeadlineMark?) -> Void] = []

    /// The needed-until the observers last learned of.
    internal var reported: DeadlineMark?

    /// The needed-until values the observers have yet to learn, oldest first.
    internal var unreported: [DeadlineMark?] = []

    /// Whether a thread is telling the observers of ``unreported`` now.
    internal var reporting = false

    internal init() {}

    /// The needed-until, given the attempt's demand word `demand`.
    internal func neededUntil(demand: DemandState) -> DeadlineMark? {
        guard bounded > 0, UInt(bounded) == demand.units, !demand.has(DemandState.pinned) else {
            return nil
        }
        return latest
    }

    /// What the attempt counts as on its source: the earlier of its own deadline and its
    /// needed-until, or `nil` (unbounded) if it has neither.
    internal func contribution(demand: DemandState) -> DeadlineMark? {
        let needed = neededUntil(demand: demand)
        return own.map { $0.earlier(needed) } ?? needed
    }

    /// Counts a consumer bounded by `mark`, unless it is on another clock; returns whether it
    /// counted.
    internal func count(_ mark: DeadlineMark) -> Bool {
        if clock == nil {
            clock = mark.clock
        } else if clock != mark.clock {
            return false
        }
        bounded += 1
        if let current = latest, current.nanoseconds >= mark.nanoseconds {
            return true
        }
        latest = mark
        return true
    }

    /// Stops counting a bounded consumer; the latest instant is forgotten once none is left.
    internal func uncount() {
        bounded -= 1
        if bounded == 0 {
            latest = nil
            if own == nil {
                clock = nil
            }
        }
    }
}
