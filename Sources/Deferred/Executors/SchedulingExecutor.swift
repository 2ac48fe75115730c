/// An executor that can also run a body after a delay.
///
/// `delay(by:upon:)` and `timeout(after:upon:substituting:)` are built on it. `DispatchQueue`
/// conforms, and the `DeferredExecutors` module adds a dedicated thread, run loops and a
/// virtual-time executor for tests, on which delays pass only when the test says so.
///
/// ```swift
/// let reply = service.fetch().timeout(after: .seconds(2), upon: DispatchQueue.global(), substituting: .empty)
/// ```
public protocol SchedulingExecutor: Executor {
    /// Arranges for `body` to run once in this executor's context, no sooner than `delay` from
    /// now.
    ///
    /// - Parameters:
    ///   - delay: How long to wait first; zero or negative runs `body` as soon as `submit`
    ///     would.
    ///   - body: The work to run.
    func submit(after delay: Duration, _ body: @escaping @Sendable () -> Void)
}

extension Duration {
    /// This duration in whole nanoseconds, clamped to the range of `Int` and never negative.
    @usableFromInline
    package var clampedNanoseconds: Int {
        guard self > .zero else {
            return 0
        }
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else {
            return .max
        }
        let (total, overflowAgain) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
        return overflowAgain ? .max : Int(total)
    }
}
