public import Deferred

/// A scheduling executor whose clock never moves: a body submitted with a delay never runs and
/// is released at once; one submitted without a delay runs at once, in place.
///
/// Deep tests use it where every stage of a chain sets a timer that must not fire (an attempt's
/// `timeout`): a million pending system timers would cost the test more than the chain.
public final class StoppedClock: SchedulingExecutor {
    /// Creates the executor.
    public init() {}

    /// Runs `body` at once.
    public func submit(_ body: @escaping @Sendable () -> Void) {
        body()
    }

    /// Runs `body` at once if `delay` is not positive; otherwise drops it, unrun.
    public func submit(after delay: Duration, _ body: @escaping @Sendable () -> Void) {
        if delay <= .zero {
            body()
        }
    }
}
