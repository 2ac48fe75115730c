extension Attempt {
    /// Returns an attempt that finishes like this one if it finishes within `limit`, and
    /// otherwise fails with `error`, cancelling this attempt unless something else needs it.
    ///
    /// ```swift
    /// let reply = api.search(query).timeout(after: .seconds(2), on: DispatchQueue.global(), failingWith: .timedOut)
    /// ```
    ///
    /// Unlike the plain future's timeout, which substitutes a value, this one stops the work.
    /// The limit only holds a weak reference to the new attempt, so an attempt that finished or
    /// was dropped early is released early.
    ///
    /// - Parameters:
    ///   - limit: How long to wait.
    ///   - executor: The executor that measures the limit.
    ///   - error: The failure when the limit passes first.
    /// - Returns: An attempt of this attempt's result, or of `error`.
    public func timeout(
        after limit: Duration,
        on executor: some SchedulingExecutor,
        failingWith error: Failure
    ) -> Attempt<Success, Failure> {
        let limited = AttemptNode<Success, Failure>(derived: shareDemand(), cancellation: node.cancellation)
        let attempt = attach(limited, AttemptNode.forward)
        if !limited.isDecided {
            executor.submit(after: limit) { [weak limited] in
                limited?.decide(.failure(error))
            }
        }
        return attempt
    }

    /// Returns an attempt that finishes with this attempt's result `delay` after this one
    /// finishes.
    ///
    /// ```swift
    /// let shownLater = api.banner().delay(by: .seconds(1), on: DispatchQueue.main)
    /// ```
    ///
    /// A cancellation passes through at once. Cancelling the new attempt while it waits means
    /// the result is never delivered.
    ///
    /// - Parameters:
    ///   - delay: How long after this attempt finishes to wait.
    ///   - executor: The executor that measures the delay.
    /// - Returns: An attempt of the same result, finished later.
    public func delay(by delay: Duration, on executor: some SchedulingExecutor) -> Attempt<Success, Failure> {
        attach(DelayAttemptNode(on: self, delay: delay, executor: executor), DelayAttemptNode.receive)
    }
}
