extension Attempt {
    /// Returns an attempt that continues with the attempt `start` makes from this attempt's
    /// value.
    ///
    /// ```swift
    /// let avatar = api.user(id).andThen(upon: .global()) { user in api.image(at: user.avatarURL) }
    /// ```
    ///
    /// `start` runs once, on `executor`, when this attempt succeeds, unless the new attempt has
    /// been cancelled by then. Cancelling the new attempt cancels whichever attempt it is
    /// waiting for — this one, or the one `start` made — unless something else needs it.
    ///
    /// - Parameters:
    ///   - executor: Where `start` runs. See ``Executor``.
    ///   - start: Starts the next step, or throws a failure.
    /// - Returns: An attempt of the next step's result.
    @_disfavoredOverload  // A closure that cannot throw takes the overload below.
    @inlinable
    public func andThen<NewSuccess: Sendable>(
        upon executor: some Executor,
        start: @escaping @Sendable (Success) throws(Failure) -> Attempt<NewSuccess, Failure>
    ) -> Attempt<NewSuccess, Failure> {
        follow(
            OnSuccessStep<Success, NewSuccess, Attempt<NewSuccess, Failure>, Failure>.self, upon: executor, body: start)
    }

    /// Returns an attempt that continues with the attempt `start` makes from this attempt's
    /// value; see `andThen(upon:start:)` with a closure that throws.
    ///
    /// This overload takes a `start` that cannot throw, so that the failure type comes from this
    /// attempt, not from the closure.
    ///
    /// - Parameters:
    ///   - executor: Where `start` runs. See ``Executor``.
    ///   - start: Starts the next step.
    /// - Returns: An attempt of the next step's result.
    @inlinable
    public func andThen<NewSuccess: Sendable>(
        upon executor: some Executor,
        start: @escaping @Sendable (Success) -> Attempt<NewSuccess, Failure>
    ) -> Attempt<NewSuccess, Failure> {
        let body: @Sendable (Success) throws(Failure) -> Attempt<NewSuccess, Failure> = start
        return andThen(upon: executor, start: body)
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
        follow(OnFailureStep<Success, Attempt<Success, Failure>, Failure>.self, upon: executor, body: start)
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

extension Attempt {
    /// Derives an attempt that follows the attempt `Step` starts with `body`, on `executor`.
    ///
    /// While it waits for this attempt, it holds a unit of this attempt's demand; once the step
    /// has started the next attempt, a unit of the next attempt's demand instead. Cancelling it,
    /// or its last consumer giving up, releases whichever unit it holds, which cancels that
    /// attempt unless something else needs it.
    @inlinable
    internal func follow<Step: AttemptStep>(
        _: Step.Type, upon executor: some Executor, body: @escaping Step.Body
    ) -> Attempt<Step.Success, Failure>
    where
        Step.Input == Success, Step.InputFailure == Failure, Step.Failure == Failure,
        Step.Output == Attempt<Step.Success, Failure>
    {
        guard executor.runsInPlace else {
            typealias Node = StepAttemptNode<Step, OnExecutor>
            let node = Node(
                on: self, place: OnExecutor(executor), body: body, cancellation: node.cancellation, follows: true)
            return attach(node, Node.receiveFollowing)
        }
        typealias Node = StepAttemptNode<Step, InPlace>
        let node = Node(on: self, place: InPlace(), body: body, cancellation: node.cancellation, follows: true)
        return attach(node, Node.receiveFollowing)
    }
}
