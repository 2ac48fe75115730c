extension FutureProtocol {
    /// Returns a future filled with the value of the future that `start` makes from this
    /// future's value.
    ///
    /// Use it to chain asynchronous steps, each of which needs the previous one's result:
    ///
    /// ```swift
    /// let avatar: Future<Image> = api.user(id: 7).andThen(upon: .global()) { user in
    ///     api.image(at: user.avatarURL)
    /// }
    /// ```
    ///
    /// `start` runs once, on `executor`, as soon as this future is filled, and is released
    /// right after. Chains of any length on ``ImmediateExecutor`` fill without growing the
    /// stack.
    ///
    /// - Parameters:
    ///   - executor: Where `start` runs. See ``Executor``.
    ///   - start: Begins the next step and returns its future.
    /// - Returns: A read-only future of the next step's value.
    @inlinable
    public func andThen<NextFuture: FutureProtocol>(
        upon executor: some Executor,
        start: @escaping @Sendable (Value) -> NextFuture
    ) -> Future<NextFuture.Value> {
        if executor.runsInPlace, let value = peek() {
            return Future(start(value))
        }
        let next = AndThenStorage(executor: executor.runsInPlace ? nil : executor, start: start)
        link(next, AndThenStorage<Value, NextFuture>.receive)
        return Future(storage: next)
    }
}
