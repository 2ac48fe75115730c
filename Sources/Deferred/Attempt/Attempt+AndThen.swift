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
        typealias Node = FollowingAttemptNode<OnSuccessStep<Success, NewSuccess, Attempt<NewSuccess, Failure>, Failure>>
        return attach(
            Node(on: self, executor: executor.runsInPlace ? nil : executor, body: start),
            Node.receive
        )
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
        typealias Node = FollowingAttemptNode<OnFailureStep<Success, Attempt<Success, Failure>, Failure>>
        return attach(
            Node(on: self, executor: executor.runsInPlace ? nil : executor, body: start),
            Node.receive
        )
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

/// An attempt that waits for its source, then for another attempt that a step starts from the
/// source's result: the node behind `andThen` and `fallback`.
///
/// While it waits for the source, it holds a unit of the source's demand; once the step has
/// started the next attempt, a unit of the next attempt's demand instead. Cancelling it, or
/// its last consumer giving up, releases whichever unit it holds, which cancels that attempt
/// unless something else needs it.
@usableFromInline
internal final class FollowingAttemptNode<Step: AttemptStep>: AttemptNode<Step.Success, Step.Failure>,
    @unchecked Sendable
where Step.InputFailure == Step.Failure, Step.Output == Attempt<Step.Success, Step.Failure> {
    /// Where the step runs; `nil` stands for the immediate executor.
    ///
    /// Taken by the single run of the source's handler that submits the step, as in
    /// ``StepAttemptNode``.
    @exclusivity(unchecked)
    @usableFromInline
    internal var executor: (any Executor)?

    /// The user's closure, until it runs or is dropped; taken by one owner at a time, as in
    /// ``StepAttemptNode``.
    @exclusivity(unchecked)
    @usableFromInline
    internal var body: Step.Body?

    @inlinable
    internal init(on source: Attempt<Step.Input, Step.Failure>, executor: (any Executor)?, body: @escaping Step.Body) {
        self.executor = executor
        self.body = body
        super.init(holding: source.node.heldByConsumer(), cancellation: source.node.cancellation)
    }

    /// The link step that the source's handler runs.
    @inlinable
    internal static func receive(
        _ source: ChainNode, _ node: ChainNode, _ input: Result<Step.Input, Step.Failure>, _ queue: inout DrainQueue
    ) {
        let node = FollowingAttemptNode.linked(node)
        if AttemptNode<Step.Input, Step.Failure>.source(source).isCancelledFlag,
            node.decideCancelled(from: input, in: &queue)
        {
            return
        } else if !Step.runs(for: input) {
            node.passOn(input, in: &queue)
        } else if let executor = node.executor.take() {
            let guarded = SubmittedBody(node)
            executor.submit {
                var queue = DrainQueue()
                guarded.node.start(input, in: &queue)
                queue.drain()
            }
        } else {
            node.start(input, in: &queue)
        }
    }

    @usableFromInline
    override internal func dropUnrunStep() {
        body = nil
    }

    /// The step starts the next attempt and follows it: its body never ran if it still holds
    /// the closure.
    @usableFromInline
    override internal var isWaitingForDroppedBody: Bool {
        body != nil
    }

    /// Decides this attempt as cancelled, since its source was with `input`; returns `false`,
    /// deciding nothing, if its failure type has no cancellation error.
    @usableFromInline
    internal func decideCancelled(from input: Result<Step.Input, Step.Failure>, in queue: inout DrainQueue) -> Bool {
        guard let error = Step.cancellation(of: input, ownError: cancellationError) else {
            return false
        }
        body = nil
        decide(.failure(error), cancelled: true, in: &queue)
        return true
    }

    /// Decides this attempt with what `input` passes on, without running the step.
    @inlinable
    internal func passOn(_ input: Result<Step.Input, Step.Failure>, in queue: inout DrainQueue) {
        body = nil
        decide(Step.passedOn(input), cancelled: false, in: &queue)
    }

    /// Runs the step unless this attempt was decided (cancelled, or nobody needs it), then
    /// follows the attempt it started.
    @inlinable
    internal func start(_ input: Result<Step.Input, Step.Failure>, in queue: inout DrainQueue) {
        guard mayStartStep, let body = body.take() else {
            body = nil
            return
        }
        switch Step.run(body, on: input) {
        case .success(let attempt):
            follow(attempt.node, in: &queue)
        case .failure(let error):
            decide(.failure(error), cancelled: false, in: &queue)
        }
    }
}
