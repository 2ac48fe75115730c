/// A transparent attempt whose result one step computes from its source's result, once: the
/// node behind `map`, `mapError` and `recover`.
///
/// When the source's result arrives, the node either passes it on at once (a failure past a
/// `map`, a success past a `recover`, and every cancellation) or runs its step on its executor,
/// unless it has been decided (cancelled) or nobody needs it by the time the step would start.
/// Subclasses say which, and hold the step closure with its exact type, so a stage costs one
/// allocation.
///
/// The step closure is taken by the single run of the source's handler, or by the one body that
/// handler submits, so it has one owner at a time.
@usableFromInline
internal class StepAttemptNode<Input: Sendable, InputFailure: Error, Success: Sendable, Failure: Error>:
    AttemptNode<Success, Failure>, @unchecked Sendable
{
    /// Where the step runs; `nil` stands for the immediate executor.
    @usableFromInline
    internal let executor: (any Executor)?

    @inlinable
    internal init(
        on source: Attempt<Input, InputFailure>,
        executor: (any Executor)?,
        cancellation: CancellationErrorSource<Failure>?
    ) {
        self.executor = executor
        let (hub, holdsUnit) = source.shareDemand()
        super.init(sharing: hub, holdsUnit: holdsUnit, cancellation: cancellation)
    }

    /// The result to pass on without running the step, or `nil` to run it.
    @usableFromInline
    internal func passedOn(_ input: Result<Input, InputFailure>) -> Result<Success, Failure>? {
        fatalError("abstract")
    }

    /// The failure a cancellation of the source becomes here.
    @usableFromInline
    internal func cancellationPassedOn(_ input: Result<Input, InputFailure>) -> Failure? {
        fatalError("abstract")
    }

    /// Runs the step, once; `nil` if it ran already.
    @usableFromInline
    internal func runStep(_ input: Result<Input, InputFailure>) -> Result<Success, Failure>? {
        fatalError("abstract")
    }

    /// Drops the step unrun, releasing its captures.
    @usableFromInline
    internal func dropStep() {
        fatalError("abstract")
    }

    /// The link step that the source's handler runs.
    @inlinable
    internal static func receive(
        _ source: ChainNode, _ node: ChainNode, _ input: Result<Input, InputFailure>, _ queue: inout DrainQueue
    ) {
        unsafeDowncast(node, to: StepAttemptNode.self).receive(
            input, sourceCancelled: AttemptNode<Input, InputFailure>.source(source).isCancelledFlag, in: &queue)
    }

    @inlinable
    internal final func receive(
        _ input: Result<Input, InputFailure>, sourceCancelled: Bool, in queue: inout DrainQueue
    ) {
        if sourceCancelled, let failure = cancellationPassedOn(input) {
            dropStep()
            decide(.failure(failure), cancelled: true, in: &queue)
        } else if let result = passedOn(input) {
            dropStep()
            decide(result, cancelled: false, in: &queue)
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

    /// Runs the step unless this attempt was decided or is no longer needed.
    @inlinable
    internal final func start(_ input: Result<Input, InputFailure>, in queue: inout DrainQueue) {
        guard mayStartStep(in: &queue), let result = runStep(input) else {
            dropStep()
            return
        }
        decide(result, cancelled: false, in: &queue)
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
