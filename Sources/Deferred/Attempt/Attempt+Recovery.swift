extension Attempt {
    /// Returns an attempt that succeeds with this attempt's value, or with the value
    /// `recovery` makes from its error.
    ///
    /// ```swift
    /// let settings = loadSettings().recover(upon: .immediate) { _ in .defaults }
    /// ```
    ///
    /// A cancellation is not a failure to recover from: it passes through, and `recovery` does
    /// not run.
    ///
    /// - Parameters:
    ///   - executor: Where `recovery` runs. See ``Executor``.
    ///   - recovery: Makes a value from the error, or throws a failure.
    /// - Returns: An attempt that fails only if `recovery` throws, or is cancelled.
    @_disfavoredOverload  // A closure that cannot throw takes the overload below.
    @inlinable
    public func recover(
        upon executor: some Executor,
        substituting recovery: @escaping @Sendable (Failure) throws(Failure) -> Success
    ) -> Attempt<Success, Failure> {
        derive(
            OnFailureStep<Success, Success, Failure>.self, upon: executor, body: recovery,
            cancellation: node.cancellation)
    }

    /// Returns an attempt that succeeds with this attempt's value, or continues with the attempt
    /// `start` makes from its error.
    ///
    /// ```swift
    /// let page = primary.fetch(path).fallback(upon: .global()) { _ in mirror.fetch(path) }
    /// ```
    ///
    /// A cancellation passes through, and `start` does not run. Cancelling the new attempt
    /// cancels whichever attempt it is waiting for, unless something else needs it.
    ///
    /// - Parameters:
    ///   - executor: Where `start` runs. See ``Executor``.
    ///   - start: Starts another attempt from the error, or throws a failure.
    /// - Returns: An attempt of this attempt's value or the fallback's result.
    @_disfavoredOverload  // A closure that cannot throw takes the overload below.
    @inlinable
    public func fallback(
        upon executor: some Executor,
        to start: @escaping @Sendable (Failure) throws(Failure) -> Attempt<Success, Failure>
    ) -> Attempt<Success, Failure> {
        typealias Node = FollowingAttemptNode<OnFailureStep<Success, Attempt<Success, Failure>, Failure>>
        return attach(
            Node(on: self, executor: executor.runsInPlace ? nil : executor, body: start),
            Node.receive
        )
    }

    /// Returns an attempt that succeeds with this attempt's value, or with the value `recovery`
    /// makes from its error; see
    /// `recover(upon:substituting:)` with a closure that throws.
    ///
    /// This overload takes a `recovery` that cannot throw, so that the failure type comes from
    /// this attempt, not from the closure.
    ///
    /// - Parameters:
    ///   - executor: Where `recovery` runs. See ``Executor``.
    ///   - recovery: Makes a value from the error.
    /// - Returns: An attempt that fails only if it is cancelled.
    @inlinable
    public func recover(
        upon executor: some Executor,
        substituting recovery: @escaping @Sendable (Failure) -> Success
    ) -> Attempt<Success, Failure> {
        let body: @Sendable (Failure) throws(Failure) -> Success = recovery
        return recover(upon: executor, substituting: body)
    }

    /// Returns an attempt that succeeds with this attempt's value, or continues with the attempt
    /// `start` makes from its error; see
    /// `fallback(upon:to:)` with a closure that throws.
    ///
    /// This overload takes a `start` that cannot throw, so that the failure type comes from this
    /// attempt, not from the closure.
    ///
    /// - Parameters:
    ///   - executor: Where `start` runs. See ``Executor``.
    ///   - start: Starts another attempt from the error.
    /// - Returns: An attempt of this attempt's value or the fallback's result.
    @inlinable
    public func fallback(
        upon executor: some Executor,
        to start: @escaping @Sendable (Failure) -> Attempt<Success, Failure>
    ) -> Attempt<Success, Failure> {
        let body: @Sendable (Failure) throws(Failure) -> Attempt<Success, Failure> = start
        return fallback(upon: executor, to: body)
    }
}
