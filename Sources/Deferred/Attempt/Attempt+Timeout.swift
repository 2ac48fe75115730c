extension Attempt {
    /// Returns an attempt that finishes like this one if it finishes within `limit`, and
    /// otherwise fails with `error`, cancelling this attempt unless something else needs it.
    ///
    /// ```swift
    /// let reply = api.search(query).timeout(after: .seconds(2), on: DispatchQueue.global(), failingWith: .timedOut)
    /// ```
    ///
    /// Unlike the plain future's timeout, which substitutes a value, this one stops the work.
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
        let limited = derive(upon: ImmediateExecutor.shared) { result, derived in
            derived.complete(with: result)
        }
        if let control = limited.control {
            executor.submit(after: limit) { [weak control] in
                control?.complete(with: .failure(error))
            }
        }
        return limited
    }
}
