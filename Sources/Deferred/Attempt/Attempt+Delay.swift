extension Attempt {
    /// Returns an attempt that finishes with this attempt's result `delay` after this one
    /// finishes.
    ///
    /// ```swift
    /// let shownLater = api.banner().delay(by: .seconds(1), upon: DispatchQueue.main)
    /// ```
    ///
    /// A cancellation passes through at once. Cancelling the new attempt while it waits means
    /// the result is never delivered. A delay that would end after the deadline of the new
    /// attempt's consumers (see ``deadline(at:)``) fails at once with the deadline's failure
    /// (``DeadlineError`` for `any Error`, `.deadlinePassed` for an ``ExpirableError``, else the
    /// cancellation error), since nobody would take the result.
    ///
    /// - Parameters:
    ///   - delay: How long after this attempt finishes to wait.
    ///   - executor: The executor that measures the delay.
    /// - Returns: An attempt of the same result, finished later.
    public func delay(by delay: Duration, upon executor: some SchedulingExecutor) -> Attempt<Success, Failure> {
        attach(DelayAttemptNode(on: self, delay: delay, executor: executor), DelayAttemptNode.receive)
    }
}

/// The node of an attempt's `delay`: passes its source's result on after a delay.
///
/// While the delay runs, the result waits in ``pending``, not in the timer's body, so that a
/// cancellation releases it at once; the timer holds only the node, and the node lets go of the
/// executor once it has armed the timer, so an executor dropped with the timer pending (a
/// virtual clock never advanced) is not kept alive by a cycle through the node.
@usableFromInline
internal final class DelayAttemptNode<Success: Sendable, Failure: Error>: AttemptNode<Success, Failure>,
    @unchecked Sendable
{
    override internal var traceName: String {
        "delay"
    }

    @usableFromInline
    internal let delay: Duration

    /// What measures the delay, until the timer is armed; taken by the single run of the
    /// source's handler.
    @exclusivity(unchecked)
    @usableFromInline
    internal var executor: (any SchedulingExecutor)?

    /// The source's result while the delay runs; tagged once it is delivered or dropped.
    @usableFromInline
    internal let pending = AtomicReference<ValueBox<Result<Success, Failure>>>()

    @usableFromInline
    internal init(on source: Attempt<Success, Failure>, delay: Duration, executor: any SchedulingExecutor) {
        self.delay = delay
        self.executor = executor
        super.init(
            holdingAlone: source.node, held: source.node.takeUnitIfPending(), cancellation: source.node.cancellation)
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
        guard let executor = node.executor.take() else {
            return
        }
        if node.isTracked, let failure = node.failureIfDelayedPastDeadline(measuredBy: executor) {
            node.decide(.failure(failure), cancelled: false, in: &queue)
            return
        }
        guard node.pending.exchangeUnlessTagged(ValueBox(passed)).exchanged else {
            return  // Cancelled already.
        }
        let guarded = DroppableCallback(node)
        executor.submit(after: node.delay) {
            guarded.run { node in
                if let delayed = node.pending.takeAndTag().object {
                    node.runStep { delayed.value }
                }
            }
        }
    }

    /// The deadline failure if the delay would end after its consumers' deadline (nobody would
    /// take the result), and the failure type can say so; `nil` otherwise.
    @usableFromInline
    internal func failureIfDelayedPastDeadline(measuredBy executor: some SchedulingExecutor) -> Failure? {
        guard let deadline = DeadlineLedger.shared.deadline(of: self),
            let remaining = deadline.remaining(measuredBy: executor), remaining < delay
        else {
            return nil
        }
        return deadlineFailure
    }

    @usableFromInline
    override internal func dropPendingWork() {
        _ = pending.takeAndTag()
    }
}
