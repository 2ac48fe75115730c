/// The node of an attempt's `delay`: passes its source's result on after a delay.
@usableFromInline
internal final class DelayAttemptNode<Success: Sendable, Failure: Error>: AttemptNode<Success, Failure>,
    @unchecked Sendable
{
    @usableFromInline
    internal let delay: Duration

    @usableFromInline
    internal let executor: any SchedulingExecutor

    @usableFromInline
    internal init(on source: Attempt<Success, Failure>, delay: Duration, executor: any SchedulingExecutor) {
        self.delay = delay
        self.executor = executor
        super.init(derived: source.shareDemand(), cancellation: source.node.cancellation)
    }

    /// The link step that the source's handler runs.
    @usableFromInline
    internal static func receive(
        _ source: ChainNode, _ node: ChainNode, _ result: Result<Success, Failure>, _ queue: inout DrainQueue
    ) {
        let node = DelayAttemptNode.linked(node)
        let (passed, cancelled) = node.passedOn(
            result, sourceCancelled: AttemptNode<Success, Failure>.source(source).isCancelledFlag)
        guard !cancelled else {
            node.decide(passed, cancelled: true, in: &queue)
            return
        }
        node.executor.submit(after: node.delay) {
            node.runStep { passed }
        }
    }
}
