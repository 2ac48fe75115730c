extension FutureProtocol {
    /// Returns a future filled with this future's value `delay` after this one is filled.
    ///
    /// ```swift
    /// let shownLater = toast.delay(by: .seconds(1), on: DispatchQueue.main)
    /// ```
    ///
    /// - Parameters:
    ///   - delay: How long after the fill to wait.
    ///   - executor: The executor that measures the delay and fills the result.
    /// - Returns: A read-only future of the same value, filled later.
    public func delay(by delay: Duration, on executor: some SchedulingExecutor) -> Future<Value> {
        let delayed = Storage<Value>()
        upon(ImmediateExecutor.shared) { value in
            executor.submit(after: delay) {
                _ = delayed.fill(value)
            }
        }
        return Future(storage: delayed)
    }
}
