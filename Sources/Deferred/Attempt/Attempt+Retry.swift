/// How the delay between retries grows.
///
/// ```swift
/// Attempt.retry(attempts: 5, delay: .milliseconds(100), upon: queue, backoff: .exponential()) { api.fetch() }
/// // waits 100 ms, 200 ms, 400 ms, 800 ms before the four retries
/// ```
public struct RetryBackoff: Sendable {
    private let delay: @Sendable (_ base: Duration, _ retry: Int) -> Duration

    /// Creates a backoff from a function of the base delay and the retry's number (1 for the
    /// first retry).
    ///
    /// - Parameter delay: The delay before a retry.
    public init(_ delay: @escaping @Sendable (_ base: Duration, _ retry: Int) -> Duration) {
        self.delay = delay
    }

    /// The same delay before every retry.
    public static var constant: RetryBackoff {
        RetryBackoff { base, _ in base }
    }

    /// A delay that grows by `multiplier` with each retry, up to `maximum`.
    ///
    /// - Parameters:
    ///   - multiplier: The factor between one delay and the next.
    ///   - maximum: The longest delay.
    /// - Returns: An exponential backoff.
    public static func exponential(multiplier: Double = 2, maximum: Duration = .seconds(60)) -> RetryBackoff {
        RetryBackoff { base, retry in
            var delay = base.secondsValue
            for _ in 1..<max(retry, 1) {
                delay *= multiplier
                if !(delay < maximum.secondsValue) {
                    return maximum
                }
            }
            return min(.seconds(delay), maximum)
        }
    }

    /// The delay before retry number `retry` (1 for the first), given the base delay.
    ///
    /// - Parameters:
    ///   - base: The delay passed to `retry`.
    ///   - retry: The retry's number, from 1.
    /// - Returns: How long to wait before that retry.
    public func delay(after base: Duration, forRetry retry: Int) -> Duration {
        delay(base, retry)
    }
}

extension Attempt {
    /// Starts an attempt with `start`, and starts it again after each failure, until it has
    /// started `attempts` times, waiting `delay` (grown by `backoff`) before each retry.
    ///
    /// ```swift
    /// let config = Attempt.retry(attempts: 3, delay: .seconds(1), upon: DispatchQueue.global()) {
    ///     api.fetchConfig()  // called at most 3 times
    /// }
    /// ```
    ///
    /// The result is the first success, or the last failure. Cancelling it cancels the attempt
    /// in flight and stops further retries: a retry that has not started when `cancel()`
    /// returns never starts. A cancellation of the attempt in flight is not retried; it passes
    /// through. For a failure type without a cancellation error, a cancelled retry fails, as
    /// cancelled, with the last try's failure (or, during a try, when that try finishes).
    ///
    /// Under a deadline (``deadline(at:)`` below it, or any consumer's that reaches it), each
    /// retry's `start` reads what remains of it as ``Deadline/current``, and the attempt it
    /// returns learns it; a backoff that would end at or after the deadline is never waited out:
    /// the loop fails at once with the last try's failure.
    ///
    /// - Parameters:
    ///   - attempts: How many times, at most, to start the work, the first time included; at
    ///     least 1 (1 starts it once and never retries).
    ///   - delay: The wait before the first retry.
    ///   - executor: The executor that measures the waits and starts the retries.
    ///   - backoff: How the wait grows from one retry to the next; constant by default.
    ///   - shouldRetry: Decides whether a failure is worth retrying; all are by default. It runs
    ///     on `executor`, only after a failure that a retry could follow.
    ///   - start: Starts one attempt of the work: the first time at once, on the calling thread,
    ///     and each retry on `executor`.
    /// - Returns: An attempt of the first success or the last failure.
    public static func retry(
        attempts: Int,
        delay: Duration = .zero,
        upon executor: some SchedulingExecutor,
        backoff: RetryBackoff = .constant,
        while shouldRetry: @escaping @Sendable (Failure) -> Bool = { _ in true },
        _ start: @escaping @Sendable () -> Attempt
    ) -> Attempt {
        // `fatalError`, not `precondition`, so that release builds keep the message too.
        guard attempts >= 1 else {
            fatalError(
                "Attempt.retry(attempts: \(attempts)): attempts counts every start of the work and must be at least 1")
        }
        let first = start()
        let retrying = RetryAttemptNode(
            plan: RetryPlan(
                retries: attempts - 1, delay: delay, executor: executor, backoff: backoff, shouldRetry: shouldRetry,
                start: start),
            cancellation: first.node.cancellation
        )
        retrying.begin(first.node)
        return Attempt(node: retrying)
    }

    /// Starts an attempt with `start`, and again after each failure, up to `count` more times.
    ///
    /// `count` counted retries, so the work started `count + 1` times, which read as one too
    /// many; write ``retry(attempts:delay:upon:backoff:while:_:)`` with `attempts: count + 1`.
    ///
    /// - Parameters:
    ///   - count: How many times to retry after the first failure.
    ///   - delay: The wait before the first retry.
    ///   - executor: The executor that measures the waits and starts the retries.
    ///   - backoff: How the wait grows from one retry to the next.
    ///   - shouldRetry: Decides whether a failure is worth retrying.
    ///   - start: Starts one attempt of the work.
    /// - Returns: An attempt of the first success or the last failure.
    @_documentation(visibility: internal)
    @available(
        *, deprecated,
        message: "'count' counts retries; write retry(attempts: count + 1, ...), which counts every start"
    )
    public static func retry(
        count: Int,
        delay: Duration = .zero,
        upon executor: some SchedulingExecutor,
        backoff: RetryBackoff = .constant,
        while shouldRetry: @escaping @Sendable (Failure) -> Bool = { _ in true },
        _ start: @escaping @Sendable () -> Attempt
    ) -> Attempt {
        retry(attempts: max(count, 0) + 1, delay: delay, upon: executor, backoff: backoff, while: shouldRetry, start)
    }
}

extension Duration {
    /// This duration in seconds, as a floating-point number.
    fileprivate var secondsValue: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

/// The fixed parts of a retry loop.
@usableFromInline
internal struct RetryPlan<Success: Sendable, Failure: Error>: Sendable {
    /// How many times to start the work again after the first start.
    let retries: Int
    let delay: Duration
    let executor: any SchedulingExecutor
    let backoff: RetryBackoff
    let shouldRetry: @Sendable (Failure) -> Bool
    let start: @Sendable () -> Attempt<Success, Failure>
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
    override internal var traceName: String {
        "retry"
    }

    /// The plan while a retry may still start; tagged once the loop is cancelled or given up.
    private let planSlot: AtomicReference<ValueBox<RetryPlan<Success, Failure>>>

    /// The failure of the last try, while the loop may still need it.
    ///
    /// It waits here while the loop decides on a retry (the hop to the executor) and, for a
    /// failure type without a cancellation error, while it waits out the backoff: the loop
    /// finishes with it if it is given up meanwhile. Tagged once the loop is cancelled, so that a
    /// cancelled loop keeps nothing of its tries.
    private let failureSlot: AtomicReference<ValueBox<Failure>>

    @exclusivity(unchecked)
    private var retries = 0

    /// The plan's executor, where the loop decides on a retry; kept apart from the plan, which a
    /// cancellation may take at any moment.
    private let executor: any SchedulingExecutor

    init(plan: RetryPlan<Success, Failure>, cancellation: CancellationErrorBox<Failure>?) {
        planSlot = AtomicReference(plan.retries > 0 ? ValueBox(plan) : nil)
        failureSlot = AtomicReference()
        executor = plan.executor
        super.init(cancellation: cancellation)
    }

    /// Follows `attempt`, the first attempt of the work, in a drain of its own.
    func begin(_ attempt: AttemptNode<Success, Failure>) {
        var queue = DrainQueue()
        begin(attempt, endingWith: nil, in: &queue)
        queue.drain()
    }

    /// Follows `attempt`, one attempt of the work; if the loop was given up meanwhile, ends it
    /// instead, with `failure` (the last try's) for a type without a cancellation error.
    func begin(_ attempt: AttemptNode<Success, Failure>, endingWith failure: Failure?, in queue: inout DrainQueue) {
        guard hold(attempt) else {
            endGivenUp(with: failure, in: &queue)
            return
        }
        attempt.link(self, in: &queue, RetryAttemptNode.receive)
    }

    /// Takes the plan out of its slot, unless the loop was cancelled or no retry remains.
    private func takePlan() -> ValueBox<RetryPlan<Success, Failure>>? {
        planSlot.exchangeUnlessTagged(nil).previous
    }

    /// Puts the plan back for a later retry; returns `false` if the loop was cancelled meanwhile.
    private func putBack(_ plan: ValueBox<RetryPlan<Success, Failure>>) -> Bool {
        planSlot.exchangeUnlessTagged(plan).exchanged
    }

    @usableFromInline
    override internal func dropPendingWork() {
        _ = planSlot.takeAndTag()
        _ = failureSlot.takeAndTag()
    }

    /// Stops the loop once nothing needs it, or it is cancelled, so that the work's captures go
    /// at once, not when its backoff ends: a type with a cancellation error was decided as
    /// cancelled already; for one without, the plan is dropped and the loop finishes with the
    /// last try's failure if it holds one (else the try in flight finishes it).
    override func demandEnded(_ end: DemandEnd) {
        guard end == .stop, !isDecided else {
            return
        }
        _ = planSlot.takeAndTag()  // No retry follows: the work's captures go now.
        var queue = DrainQueue()
        defer { queue.drain() }
        if let failure = failureSlot.exchangeUnlessTagged(nil).previous?.value {
            decide(.failure(failure), cancelled: true, in: &queue)
        }
    }

    /// Ends a loop that was given up: as cancelled, with its cancellation error if its type has
    /// one, else with `failure`, the last try's, if there is one.
    private func endGivenUp(with failure: Failure?, in queue: inout DrainQueue) {
        if !decideCancelled(in: &queue), let failure {
            decide(.failure(failure), cancelled: true, in: &queue)
        }
    }

    /// The link step that the handler of the attempt in flight runs.
    private static func receive(
        _ source: ChainNode, _ node: ChainNode, _ result: Result<Success, Failure>, _ queue: inout DrainQueue
    ) {
        let node = RetryAttemptNode.linked(node)
        let (passed, cancelled) = node.passedOn(
            result, sourceCancelled: AttemptNode<Success, Failure>.source(source).isCancelledFlag)
        guard !cancelled, case .failure(let error) = passed, node.mayRetry else {
            node.dropPendingWork()  // No retry follows: the work's captures go now.
            node.decide(passed, cancelled: cancelled, in: &queue)
            return
        }
        guard node.failureSlot.exchangeUnlessTagged(ValueBox(error)).exchanged else {
            return  // Cancelled meanwhile: the cancellation decided the attempt.
        }
        // `shouldRetry` is user code: it runs on the executor, like the retries it decides on.
        // The body holds the node only, so that a cancellation meanwhile releases the work's
        // captures and the failure at once. An executor that drops it orphans the loop.
        let guarded = DroppableCallback(node)
        node.executor.submit {
            guarded.run { $0.considerRetry() }
        }
    }

    /// Whether a retry may still follow: the plan is in its slot.
    private var mayRetry: Bool {
        !planSlot.isEmpty
    }

    /// Whether the loop may go on: it is pending and something needs it.
    private var mayGoOn: Bool {
        mayStartStep && !isStopped
    }

    /// Asks the plan whether the last try's failure is worth a retry, and schedules it or
    /// decides the loop with the failure.
    private func considerRetry() {
        var queue = DrainQueue()
        defer { queue.drain() }
        guard let failure = failureSlot.exchangeUnlessTagged(nil).previous?.value else {
            return  // Cancelled or given up meanwhile, which decided the attempt.
        }
        guard mayGoOn, let box = takePlan() else {
            endGivenUp(with: failure, in: &queue)
            return
        }
        let plan = box.value
        guard plan.shouldRetry(failure) else {
            dropPendingWork()  // No retry follows: the work's captures go now.
            decide(.failure(failure), cancelled: false, in: &queue)
            return
        }
        if isTracked, let deadline = DeadlineLedger.shared.deadline(of: self),
            let remaining = deadline.remaining(measuredBy: plan.executor),
            remaining <= plan.backoff.delay(after: plan.delay, forRetry: retries + 1)
        {
            // The backoff would end at or after the deadline of the loop's consumers: nobody would
            // take the next try's result. The loop fails with the last try's failure.
            dropPendingWork()
            decide(.failure(failure), cancelled: false, in: &queue)
            return
        }
        retries += 1
        if cancellationError == nil {
            // Kept through the backoff: a loop given up then has nothing else to finish with.
            _ = failureSlot.exchangeUnlessTagged(ValueBox(failure))
        }
        guard putBack(box) else {
            endGivenUp(with: failure, in: &queue)  // Given up meanwhile.
            return
        }
        // The loop no longer waits on the failed attempt: let go of it now, so that what it waited
        // on (the work a time limit gave up on) stops before the backoff, not as the next starts.
        hold(taken: nil)
        // The timer holds the node, not the plan: a cancellation before it fires releases the
        // work's captures at once. An executor that drops it orphans the loop.
        let guarded = DroppableCallback(self)
        plan.executor.submit(after: plan.backoff.delay(after: plan.delay, forRetry: retries)) {
            guarded.run { $0.startRetry() }
        }
    }

    /// Starts the next attempt of the work, unless the loop was cancelled or is no longer needed.
    private func startRetry() {
        var queue = DrainQueue()
        defer { queue.drain() }
        // Kept only for a type without a cancellation error.
        let failure = failureSlot.exchangeUnlessTagged(nil).previous?.value
        guard mayGoOn, let box = takePlan() else {
            endGivenUp(with: failure, in: &queue)
            return
        }
        // Each try runs under what remains of the loop's consumers' deadline.
        let deadline = isTracked ? DeadlineLedger.shared.deadline(of: self) : nil
        let attempt = Deadline.run(under: deadline) { box.value.start() }
        if retries < box.value.retries {
            // Fails only if the loop was cancelled meanwhile; following the new attempt then
            // cancels it unless something else needs it.
            _ = putBack(box)
        }
        begin(attempt.node, endingWith: failure, in: &queue)
    }
}
