/// The fixed parts of a retry loop.
@usableFromInline
internal struct RetryPlan<Success: Sendable, Failure: Error>: Sendable {
    let count: Int
    let delay: Duration
    let executor: any SchedulingExecutor
    let backoff: RetryBackoff
    let shouldRetry: @Sendable (Failure) -> Bool
    let start: @Sendable () -> Attempt<Success, Failure>
}

/// The node of a `retry`: follows one attempt of the work after another.
///
/// The plan, with the work's captures, is released as soon as no retry can start any more: when
/// the last one has started, or the loop has ended.
///
/// `plan` and `retries` are used only by the one party that moves the loop on: the handler of
/// the attempt in flight, then the body that starts the next, each ordered after the other by
/// the storage and the executor.
@usableFromInline
internal final class RetryAttemptNode<Success: Sendable, Failure: Error>: AttemptNode<Success, Failure>,
    @unchecked Sendable
{
    @exclusivity(unchecked)
    private var plan: RetryPlan<Success, Failure>?

    @exclusivity(unchecked)
    private var retries = 0

    init(plan: RetryPlan<Success, Failure>, cancellation: CancellationErrorSource<Failure>?) {
        self.plan = plan.count > 0 ? plan : nil
        super.init(owningHubWith: cancellation)
    }

    /// Follows `attempt`, the first attempt of the work, in a drain of its own.
    func begin(_ attempt: AttemptNode<Success, Failure>) {
        var queue = DrainQueue()
        begin(attempt, in: &queue)
        queue.drain()
    }

    /// Follows `attempt`, one attempt of the work.
    func begin(_ attempt: AttemptNode<Success, Failure>, in queue: inout DrainQueue) {
        guard hold(attempt) else {
            _ = decideCancelled(in: &queue)
            return
        }
        attempt.link(self, in: &queue, RetryAttemptNode.receive)
    }

    /// The link step that the handler of the attempt in flight runs.
    private static func receive(
        _ source: ChainNode, _ node: ChainNode, _ result: Result<Success, Failure>, _ queue: inout DrainQueue
    ) {
        let node = RetryAttemptNode.linked(node)
        let (passed, cancelled) = node.passedOn(
            result, sourceCancelled: AttemptNode<Success, Failure>.source(source).isCancelledFlag)
        guard !cancelled, case .failure(let error) = passed, let plan = node.plan, plan.shouldRetry(error) else {
            node.plan = nil
            node.decide(passed, cancelled: cancelled, in: &queue)
            return
        }
        node.retries += 1
        if node.retries == plan.count {
            node.plan = nil
        }
        plan.executor.submit(after: plan.backoff.delay(after: plan.delay, forRetry: node.retries)) {
            var queue = DrainQueue()
            if node.mayStartStep(in: &queue) {
                node.begin(plan.start().node, in: &queue)
            }
            queue.drain()
        }
    }
}
