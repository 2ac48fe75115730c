extension FutureProtocol {
    /// Returns a future filled with this future's value if it arrives within `limit`, and with
    /// `substitute` otherwise.
    ///
    /// ```swift
    /// let avatar = api.avatar(for: user).timeout(after: .seconds(2), upon: DispatchQueue.global(), substituting: .placeholder)
    /// ```
    ///
    /// A value that arrives after the limit is dropped, and the substitute arrives even if this
    /// future is released unfilled. The result holds no reference to this future, and this
    /// future's handler holds only the result's storage, so nothing outlives whichever of the
    /// two comes last: this future's fill (or release) and the limit.
    ///
    /// - Parameters:
    ///   - limit: How long to wait for the value.
    ///   - executor: The executor that measures the limit.
    ///   - substitute: The value to use when the limit passes first.
    /// - Returns: A read-only future of this future's value or the substitute.
    public func timeout(
        after limit: Duration,
        upon executor: some SchedulingExecutor,
        substituting substitute: Value
    ) -> Future<Value> {
        if let value = peek() {
            return Future(filledWith: value)
        }
        let result = Storage<Value>()
        link(result, Storage<Value>.forward)
        if result.isTraced {
            PendingFutures.rename(result, "timeout(\(limit))")
        }
        // The limit keeps the result: its handlers get the substitute even if nothing else
        // will ever fill it (this future's producer gave up and released it, say).
        executor.submit(after: limit) {
            // Recorded before the substitute is visible, so that a dump taken by whoever receives
            // it finds the limit passed (a limit beaten by the value meanwhile has no work above
            // it still running, so no dump reports it).
            if result.isTraced, !result.isFilled {
                PendingFutures.gaveUp(result, .limitPassedWhileWorkRuns)
            }
            _ = result.fill(substitute)
        }
        return Future(storage: result)
    }
}
