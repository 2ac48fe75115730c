extension FutureProtocol {
    /// Returns a future filled with `transform` applied to this future's value.
    ///
    /// The transform runs once, on `executor`, as soon as this future is filled, and its
    /// result is stored; the closure is released right after it runs. Chains of any length
    /// on ``ImmediateExecutor`` fill without growing the stack.
    ///
    /// ```swift
    /// let size: Future<Int> = download.map(upon: .global()) { data in data.count }
    /// ```
    ///
    /// - Parameters:
    ///   - executor: Where `transform` runs. See ``Executor``.
    ///   - transform: Computes the new value from this future's value.
    /// - Returns: A read-only future of the transformed value.
    @inlinable
    public func map<NewValue: Sendable>(
        upon executor: some Executor,
        transform: @escaping @Sendable (Value) -> NewValue
    ) -> Future<NewValue> {
        if executor.runsInPlace, let value = peek() {
            return Future(filledWith: transform(value))
        }
        let mapped = MapStorage(executor: executor.runsInPlace ? nil : executor, transform: transform)
        link(mapped, MapStorage<Value, NewValue>.receive)
        return Future(storage: mapped)
    }
}
