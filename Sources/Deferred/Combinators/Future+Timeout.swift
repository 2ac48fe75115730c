extension FutureProtocol {
    /// Returns a future filled with this future's value if it arrives within `limit`, and with
    /// `substitute` otherwise.
    ///
    /// ```swift
    /// let avatar = api.avatar(for: user).timeout(after: .seconds(2), on: DispatchQueue.global(), substituting: .placeholder)
    /// ```
    ///
    /// A value that arrives after the limit is dropped. The result holds no reference to this
    /// future, this future's handler holds only the result's storage, and the pending limit
    /// holds it only weakly, so dropping the result while both are pending releases it and its
    /// handlers at once; only `substitute` waits for the limit.
    ///
    /// - Parameters:
    ///   - limit: How long to wait for the value.
    ///   - executor: The executor that measures the limit.
    ///   - substitute: The value to use when the limit passes first.
    /// - Returns: A read-only future of this future's value or the substitute.
    public func timeout(
        after limit: Duration,
        on executor: some SchedulingExecutor,
        substituting substitute: Value
    ) -> Future<Value> {
        if let value = peek() {
            return Future(value: value)
        }
        let result = Storage<Value>()
        link(result, Storage<Value>.forward)
        // Weak: once nothing else needs the result (its future was dropped and this future was
        // filled or released), the pending timer need not keep it and its handlers alive.
        executor.submit(after: limit) { [weak result] in
            _ = result?.fill(substitute)
        }
        return Future(storage: result)
    }
}
