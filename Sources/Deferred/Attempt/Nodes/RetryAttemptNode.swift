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

/// A retry plan as an object, so that an atomic slot can hold it and a cancellation can take it.
@usableFromInline
internal final class RetryPlanBox<Success: Sendable, Failure: Error>: Sendable {
    let plan: RetryPlan<Success, Failure>

    init(_ plan: RetryPlan<Success, Failure>) {
        self.plan = plan
    }
}

/// The node of a `retry`: follows one attempt of the work after another.
///
/// The plan, with the work's captures, is held in ``planSlot`` as long as a retry may still
/// start. The party that moves the loop on (the handler of the attempt in flight, then the timer
/// body that starts the next) takes it out while it uses it and puts it back if more retries
/// remain; cancelling the loop takes it out for good, so a cancelled retry waiting out its
/// backoff keeps none of the work's captures: its timer finds the slot empty and does nothing.
///
/// `retries` is used only by the party that moves the loop on, each ordered after the other by
/// the storage and the executor.
@usableFromInline
internal final class RetryAttemptNode<Success: Sendable, Failure: Error>: AttemptNode<Success, Failure>,
    @unchecked Sendable
{
    /// The plan while a retry may still start; tagged once the loop is cancelled.
    private let planSlot: AtomicReference<RetryPlanBox<Success, Failure>>

    @exclusivity(unchecked)
    private var retries = 0

    init(plan: RetryPlan<Success, Failure>, cancellation: CancellationErrorSource<Failure>?) {
        planSlot = AtomicReference(plan.count > 0 ? RetryPlanBox(plan) : nil)
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

    /// Takes the plan out of its slot, unless the loop was cancelled or no retry remains.
    private func takePlan() -> RetryPlanBox<Success, Failure>? {
        planSlot.exchangeUnlessTagged(nil).previous
    }

    /// Puts the plan back for a later retry; returns `false` if the loop was cancelled meanwhile.
    private func putBack(_ plan: RetryPlanBox<Success, Failure>) -> Bool {
        planSlot.exchangeUnlessTagged(plan).exchanged
    }

    @usableFromInline
    override internal func dropPendingWork() {
        _ = planSlot.takeAndTag()
    }

    /// The link step that the handler of the attempt in flight runs.
    private static func receive(
        _ source: ChainNode, _ node: ChainNode, _ result: Result<Success, Failure>, _ queue: inout DrainQueue
    ) {
        let node = RetryAttemptNode.linked(node)
        let (passed, cancelled) = node.passedOn(
            result, sourceCancelled: AttemptNode<Success, Failure>.source(source).isCancelledFlag)
        guard !cancelled, case .failure(let error) = passed, let box = node.takePlan(), box.plan.shouldRetry(error)
        else {
            node.decide(passed, cancelled: cancelled, in: &queue)
            return
        }
        node.retries += 1
        let plan = box.plan
        guard node.putBack(box) else {
            return  // Cancelled meanwhile: the cancellation decides the attempt.
        }
        // The timer holds the node, not the plan: a cancellation before it fires releases the
        // work's captures at once.
        plan.executor.submit(after: plan.backoff.delay(after: plan.delay, forRetry: node.retries)) {
            node.startRetry()
        }
    }

    /// Starts the next attempt of the work, unless the loop was cancelled or is no longer needed.
    private func startRetry() {
        var queue = DrainQueue()
        defer { queue.drain() }
        guard let box = takePlan() else {
            return
        }
        guard mayStartStep(in: &queue) else {
            return
        }
        let attempt = box.plan.start()
        if retries < box.plan.count {
            // Fails only if the loop was cancelled meanwhile; following the new attempt then
            // cancels it unless something else needs it.
            _ = putBack(box)
        }
        begin(attempt.node, in: &queue)
    }
}
