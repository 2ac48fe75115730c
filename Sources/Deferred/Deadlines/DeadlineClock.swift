/// A clock that attempts' deadlines are kept on: the continuous clock, or the
/// `VirtualTimeExecutor` that drives a graph in a test.
///
/// Deadlines compare only on one clock. A consumer whose deadline is on another clock than the
/// deadlines its attempt already knows counts as having none (debug builds print a warning once):
/// a graph keeps its deadlines on one clock, the continuous clock in a program and the test's
/// virtual clock in a test.
///
/// The library conforms `ContinuousClock` and `VirtualTimeExecutor`; another clock may conform
/// by naming an instant that never changes, from which deadlines are measured.
public protocol DeadlineClock: Clock, Sendable where Duration == Swift.Duration {
    /// An instant of this clock, the same for as long as the clock lives, from which the library
    /// measures deadlines on it.
    var deadlineOrigin: Instant { get }
}

extension ContinuousClock: DeadlineClock {
    /// The instant the library first measured a deadline from, in this process.
    public var deadlineOrigin: Instant {
        DeadlineMark.continuousOrigin
    }
}

/// A deadline as the library keeps it: which clock, and how far from that clock's
/// ``DeadlineClock/deadlineOrigin``, in nanoseconds.
@usableFromInline
internal struct DeadlineMark: Sendable, Hashable {
    /// The clock: its object for a clock that is a class (each virtual clock has its own time),
    /// its type for one that is a value (every `ContinuousClock()` reads the same time).
    @usableFromInline
    internal let clock: ObjectIdentifier

    /// Nanoseconds since the clock's origin.
    @usableFromInline
    internal let nanoseconds: Int64

    /// The origin of the continuous clock's deadlines.
    internal static let continuousOrigin = ContinuousClock.now

    /// The identity of `clock`.
    @inlinable
    internal static func identity<C: DeadlineClock>(of clock: C) -> ObjectIdentifier {
        if C.self is AnyObject.Type {
            return ObjectIdentifier(clock as AnyObject)
        }
        return ObjectIdentifier(C.self)
    }

    /// `instant` on `clock`.
    @inlinable
    internal init<C: DeadlineClock>(_ instant: C.Instant, on clock: C) {
        self.clock = Self.identity(of: clock)
        nanoseconds = clock.deadlineOrigin.duration(to: instant).signedNanoseconds
    }

    /// The instant `limit` from now on the clock of `executor`, if it keeps deadlines, and on
    /// the continuous clock otherwise.
    @usableFromInline
    internal init(after limit: Duration, on executor: some SchedulingExecutor) {
        if let clock = executor as? any DeadlineClock {
            self = Self.now(of: clock, advancedBy: limit)
        } else {
            let clock = ContinuousClock()
            self.init(clock.now.advanced(by: limit.clampedForInstants), on: clock)
        }
    }

    /// `limit` after `clock`'s now.
    private static func now<C: DeadlineClock>(of clock: C, advancedBy limit: Duration) -> DeadlineMark {
        DeadlineMark(clock.now.advanced(by: limit.clampedForInstants), on: clock)
    }

    /// The time from now until this deadline, on the continuous clock or on `executor`'s if it
    /// is this deadline's clock; `nil` on a clock it cannot read.
    @usableFromInline
    internal func remaining(measuredBy executor: some SchedulingExecutor) -> Duration? {
        let continuous = ContinuousClock()
        if let instant = instant(on: continuous) {
            return continuous.now.duration(to: instant)
        }
        guard let clock = executor as? any DeadlineClock else {
            return nil
        }
        return remaining(on: clock)
    }

    private func remaining<C: DeadlineClock>(on clock: C) -> Duration? {
        instant(on: clock).map { clock.now.duration(to: $0) }
    }

    /// This deadline as an instant of `clock`, or `nil` if it is on another clock.
    @inlinable
    internal func instant<C: DeadlineClock>(on clock: C) -> C.Instant? {
        guard self.clock == Self.identity(of: clock) else {
            return nil
        }
        return clock.deadlineOrigin.advanced(by: .nanoseconds(nanoseconds))
    }

    /// The earlier of `self` and `other` (`nil` is no deadline, later than any); when they are
    /// on different clocks, `self`.
    @inlinable
    internal func earlier(_ other: DeadlineMark?) -> DeadlineMark {
        guard let other, other.clock == clock, other.nanoseconds < nanoseconds else {
            return self
        }
        return other
    }
}

extension Duration {
    /// This duration in whole nanoseconds, rounded toward zero and clamped to `Int64`.
    @inlinable
    internal var signedNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else {
            return seconds < 0 ? .min : .max
        }
        let (total, overflowAgain) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
        guard !overflowAgain else {
            return seconds < 0 ? .min : .max
        }
        return total
    }
}
