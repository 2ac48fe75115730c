/// How the delay between retries grows.
///
/// ```swift
/// Attempt.retry(count: 4, delay: .milliseconds(100), on: queue, backoff: .exponential()) { api.fetch() }
/// // waits 100 ms, 200 ms, 400 ms, 800 ms before the four retries
/// ```
public struct RetryBackoff: Sendable {
    private let delay: @Sendable (_ base: Duration, _ retry: Int) -> Duration

    /// Creates a backoff from a function of the base delay and the retry's number (1 for the
    /// first retry).
    ///
    /// - Parameter delay: The delay before a retry.
    public init(_ delay: @escaping @Sendable (_ base: Duration, _ retry: Int) -> Duration) {
        self.delay = delay
    }

    /// The same delay before every retry.
    public static var constant: RetryBackoff {
        RetryBackoff { base, _ in base }
    }

    /// A delay that grows by `multiplier` with each retry, up to `maximum`.
    ///
    /// - Parameters:
    ///   - multiplier: The factor between one delay and the next.
    ///   - maximum: The longest delay.
    /// - Returns: An exponential backoff.
    public static func exponential(multiplier: Double = 2, maximum: Duration = .seconds(60)) -> RetryBackoff {
        RetryBackoff { base, retry in
            var delay = base.secondsValue
            for _ in 1..<max(retry, 1) {
                delay *= multiplier
                if !(delay < maximum.secondsValue) {
                    return maximum
                }
            }
            return min(.seconds(delay), maximum)
        }
    }

    /// The delay before retry number `retry` (1 for the first), given the base delay.
    ///
    /// - Parameters:
    ///   - base: The delay passed to `retry`.
    ///   - retry: The retry's number, from 1.
    /// - Returns: How long to wait before that retry.
    public func delay(after base: Duration, forRetry retry: Int) -> Duration {
        delay(base, retry)
    }
}

extension Attempt {
    /// Starts an attempt with `start`, and starts it again after each failure, up to `count`
    /// more times, waiting `delay` (grown by `backoff`) before each retry.
    ///
    /// ```swift
    /// let config = Attempt.retry(count: 3, delay: .seconds(1), on: DispatchQueue.global()) {
    ///     api.fetchConfig()
    /// }
    /// ```
    ///
    /// The result is the first success, or the last failure. Cancelling it cancels the attempt
    /// in flight and stops further retries: a retry that has not started when `cancel()`
    /// returns never starts. A cancellation of the attempt in flight is not retried; it passes
    /// through.
    ///
    /// - Parameters:
    ///   - count: How many times to retry after the first failure.
    ///   - delay: The wait before the first retry.
    ///   - executor: The executor that measures the waits and starts the retries.
    ///   - backoff: How the wait grows from one retry to the next; constant by default.
    ///   - shouldRetry: Decides whether a failure is worth retrying; all are by default.
    ///   - start: Starts one attempt of the work.
    /// - Returns: An attempt of the first success or the last failure.
    public static func retry(
        count: Int,
        delay: Duration = .zero,
        on executor: some SchedulingExecutor,
        backoff: RetryBackoff = .constant,
        while shouldRetry: @escaping @Sendable (Failure) -> Bool = { _ in true },
        _ start: @escaping @Sendable () -> Attempt
    ) -> Attempt {
        let first = start()
        let retrying = RetryAttemptNode(
            plan: RetryPlan(
                count: count, delay: delay, executor: executor, backoff: backoff, shouldRetry: shouldRetry,
                start: start),
            cancellation: first.node.cancellation
        )
        // Nothing needing the loop any more cancels it now, not when its backoff ends, so that the
        // work's captures go at once. Weak: the hub must not keep its own attempt alive.
        retrying.consumerHub().onCancel { [weak retrying] in
            retrying?.settleIfAbandoned()
        }
        retrying.begin(first.node)
        return Attempt(node: retrying)
    }
}

extension Duration {
    /// This duration in seconds, as a floating-point number.
    fileprivate var secondsValue: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
