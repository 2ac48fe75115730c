/// A transparent attempt whose result its step computes from its source's result, once: the
/// node behind `map`, `mapError` and `recover`.
///
/// When the source's result arrives, the node either passes it on at once (a failure past a
/// `map`, a success past a `recover`, and every cancellation) or runs its step on its executor,
/// unless it has been decided (cancelled) or nobody needs it by the time the step would start.
///
/// The step is taken by the single run of the source's handler, or by the one body that
/// handler submits, so it has one owner at a time.
@usableFromInline
internal final class StepAttemptNode<Step: AttemptStep>: AttemptNode<Step.Success, Step.Failure>, @unchecked Sendable
where Step.Output == Step.Success {
    /// Where the step runs; `nil` stands for the immediate executor.
    @usableFromInline
    internal let executor: (any Executor)?

    /// The step, until it runs or is dropped.
    @exclusivity(unchecked)
    @usableFromInline
    internal var step: Step?

    @inlinable
    internal init(
        on source: Attempt<Step.Input, Step.InputFailure>,
        executor: (any Executor)?,
        step: Step,
        cancellation: CancellationErrorSource<Step.Failure>?
    ) {
        self.executor = executor
        self.step = step
        let (hub, holdsUnit) = source.shareDemand()
        super.init(sharing: hub, holdsUnit: holdsUnit, cancellation: cancellation)
    }

    /// The link step that the source's handler runs.
    @inlinable
    internal static func receive(
        _ source: ChainNode, _ node: ChainNode, _ input: Result<Step.Input, Step.InputFailure>,
        _ queue: inout DrainQueue
    ) {
        unsafeDowncast(node, to: StepAttemptNode.self).receive(
            input, sourceCancelled: AttemptNode<Step.Input, Step.InputFailure>.source(source).isCancelledFlag,
            in: &queue)
    }

    @inlinable
    internal func receive(
        _ input: Result<Step.Input, Step.InputFailure>, sourceCancelled: Bool, in queue: inout DrainQueue
    ) {
        if sourceCancelled {
            receiveFromCancelledSource(input, in: &queue)
        } else if !Step.runs(for: input) {
            passOn(input, in: &queue)
        } else if let executor {
            executor.submit { [self] in
                var queue = DrainQueue()
                start(input, in: &queue)
                queue.drain()
            }
        } else {
            start(input, in: &queue)
        }
    }

    /// Decides this attempt as cancelled, since its source was; or, if its failure type has
    /// no cancellation error, takes `input` as usual.
    @usableFromInline
    internal func receiveFromCancelledSource(_ input: Result<Step.Input, Step.InputFailure>, in queue: inout DrainQueue)
    {
        if let failure = Step.cancellation(of: input, ownError: cancellationError) {
            step = nil
            decide(.failure(failure), cancelled: true, in: &queue)
        } else {
            receive(input, sourceCancelled: false, in: &queue)
        }
    }

    /// Decides this attempt with what `input` passes on, without running the step.
    @inlinable
    internal func passOn(_ input: Result<Step.Input, Step.InputFailure>, in queue: inout DrainQueue) {
        step = nil
        decide(Step.passedOn(input), cancelled: false, in: &queue)
    }

    /// Runs the step unless this attempt was decided or is no longer needed.
    @inlinable
    internal func start(_ input: Result<Step.Input, Step.InputFailure>, in queue: inout DrainQueue) {
        guard mayStartStep(in: &queue), let step = step.take() else {
            step = nil
            return
        }
        decide(step.run(input), cancelled: false, in: &queue)
    }
}

extension Attempt {
    /// The hub and unit of demand for a transparent attempt derived from this one: this
    /// attempt's hub, with the unit this attempt hands over or a new one; or, if nobody needed
    /// this attempt any more, no unit, after deciding it as cancelled.
    @inlinable
    internal func shareDemand() -> (hub: AttemptHub, holdsUnit: Bool) {
        if let hub = node.takeDemand(handOver: true) {
            return (hub, true)
        }
        node.settleIfAbandoned()
        return (node.consumerHub(), false)
    }

    /// Links `derived` to this attempt with `step`, running it at once if this attempt has
    /// finished, and returns it as an attempt.
    @inlinable
    internal func attach<NewSuccess, NewFailure>(
        _ derived: AttemptNode<NewSuccess, NewFailure>,
        _ step: @escaping @Sendable (ChainNode, ChainNode, Result<Success, Failure>, inout DrainQueue) -> Void
    ) -> Attempt<NewSuccess, NewFailure> {
        var queue = DrainQueue()
        node.link(derived, in: &queue, step)
        queue.drain()
        return Attempt<NewSuccess, NewFailure>(node: derived)
    }
}
