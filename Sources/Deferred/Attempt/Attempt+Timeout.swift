public import Dispatch
public import Synchronization

extension Attempt {
    /// Returns an attempt that finishes like this one if it finishes within `limit`, and
    /// otherwise fails with `error`, cancelling this attempt unless something else needs it.
    ///
    /// ```swift
    /// let reply = api.search(query).timeout(after: .seconds(2), upon: DispatchQueue.global(), failingWith: .timedOut)
    /// ```
    ///
    /// Unlike the plain future's timeout, which substitutes a value, this one stops the work: when
    /// the limit passes, this attempt is cancelled (unless something else needs it) before the
    /// timeout is visible, so whoever learns of it (a callback, a reader, a task) finds this
    /// attempt cancelled or finished; its producer's cancel handlers run before the callbacks
    /// already added to the new attempt, and before those of every attempt derived from it (a
    /// `map`, a `delay`, a join that still waits), which no longer hold the work.
    /// The limit only holds a weak reference to the new attempt, so an attempt that finished or
    /// was dropped early is released early; one whose source lets go of it (its writer was lost)
    /// while attempts derived from it wait keeps itself until the limit passes. On a Dispatch
    /// queue or a `LoopExecutor` of `DeferredExecutors`, an attempt that finishes or is cancelled
    /// before the limit also withdraws the limit, which then costs nothing more. A limit of zero
    /// or less has passed as it is set: the new attempt is decided, and the work told to stop,
    /// before this returns, without `executor`.
    ///
    /// - Parameters:
    ///   - limit: How long to wait.
    ///   - executor: The executor that measures the limit.
    ///   - error: The failure when the limit passes first.
    /// - Returns: An attempt of this attempt's result, or of `error`.
    @inlinable
    public func timeout(
        after limit: Duration,
        upon executor: some SchedulingExecutor,
        failingWith error: Failure
    ) -> Attempt<Success, Failure> {
        limited(after: limit, upon: executor, failingWith: error, deadline: nil)
    }

    /// The attempt of a time limit: `limit` measured by `executor`, then `error`.
    ///
    /// `deadline`, if given, is the limit's instant as the deadline ledger keeps it, for a stage
    /// that always tells its source (`deadline(at:)`). A `timeout` tells a tracked source only
    /// (see ``DeadlineLedger``), measured on `executor`'s clock if it keeps deadlines, and on the
    /// continuous clock otherwise.
    @inlinable
    internal func limited(
        after limit: Duration,
        upon executor: some SchedulingExecutor,
        failingWith error: Failure,
        deadline: DeadlineMark?
    ) -> Attempt<Success, Failure> {
        let limited = TimeoutAttemptNode<Success, Failure>(
            holding: node.heldByConsumer(), cancellation: node.cancellation, failure: error)
        let attempt = attach(limited, TimeoutAttemptNode.receive, tracksItself: true)
        if limited.isTraced {
            PendingFutures.rename(limited, deadline == nil ? "timeout(\(limit))" : "deadline")
        }
        let nanoseconds = limit.clampedNanoseconds
        if nanoseconds <= 0 {
            // Passed as it is set: decided and stopped before this returns, so no reader can find
            // the limit's failure while the work's cancel handlers are still to run. Its deadline
            // tells nobody anything, so it never enters the ledger.
            if !limited.isDecided {
                limited.expire()
            }
            return attempt
        }
        if let deadline {
            DeadlineLedger.shared.track(limited, own: deadline)
        } else if node.isTracked {
            DeadlineLedger.shared.track(limited, own: DeadlineMark(after: limit, on: executor))
        }
        if !limited.isDecided {
            if let queue = executor as? DispatchQueue {
                let timer = LimitTimer(limiting: limited, on: queue, after: nanoseconds, expire: Self.expireLimited)
                DispatchTimers.shared.schedule(timer)
                limited.hold(timer)
            } else if let timers = executor as? any TimerScheduling {
                let timer = LimitTimer(limiting: limited, on: nil, after: nanoseconds, expire: Self.expireLimited)
                timers.schedule(timer, after: limit)
                limited.hold(timer)
            } else {
                let guarded = LimitBody(limited)
                executor.submit(after: limit) {
                    guarded.node?.expire()
                }
            }
        }
        return attempt
    }

    /// What a limit's timer does with the node it limits as the limit passes (`lost` false), or
    /// as its executor abandons it (`lost` true).
    @inlinable
    internal static func expireLimited(_ limited: ChainNode, lost: Bool) {
        let node = TimeoutAttemptNode<Success, Failure>.linked(limited)
        if lost {
            node.limitLost()
        } else {
            node.expire()
        }
    }
}

extension Attempt where Failure == any Error {
    /// Returns an attempt that finishes like this one if it finishes within `limit`, and
    /// otherwise fails with a ``TimeoutError`` naming the limit, cancelling this attempt unless
    /// something else needs it.
    ///
    /// ```swift
    /// let reply = api.search(query).timeout(after: .seconds(2), upon: DispatchQueue.global())
    /// ```
    ///
    /// The same limit as ``timeout(after:upon:failingWith:)``, for attempts of `any Error`, which
    /// need no error of their own to say that time ran out.
    ///
    /// - Parameters:
    ///   - limit: How long to wait.
    ///   - executor: The executor that measures the limit.
    /// - Returns: An attempt of this attempt's result, or of a ``TimeoutError``.
    @inlinable
    public func timeout(after limit: Duration, upon executor: some SchedulingExecutor) -> Attempt<Success, any Error> {
        timeout(after: limit, upon: executor, failingWith: TimeoutError(limit: limit))
    }
}

/// The node of an attempt's `timeout`: finishes with its source's result, or with its failure
/// when the limit passes first.
///
/// Like every stage, it holds its source, so that deciding lets go of the source at once. The failure
/// waits in ``pending``, not in the timer's body, which holds the node only weakly: once the
/// attempt is decided, or dropped, the timer keeps nothing of it. A limit measured by a Dispatch
/// queue waits in ``timer``, and is withdrawn as the attempt is decided otherwise.
@usableFromInline
internal final class TimeoutAttemptNode<Success: Sendable, Failure: Error>: AttemptNode<Success, Failure>,
    @unchecked Sendable
{
    override internal var traceName: String {
        "timeout"
    }

    /// The failure for when the limit passes; taken when it does, or dropped on a cancellation.
    ///
    /// It holds a `ValueBox<Failure>`, typed only as an object, so that releasing the node
    /// looks up no metadata of a type made of `Success` and `Failure`.
    @usableFromInline
    internal let pending: AtomicReference<AnyObject>

    /// The limit's timer on ``DispatchTimers``, if a Dispatch queue measures it; tagged once the
    /// attempt is decided, so that a timer stored later is withdrawn at once.
    @usableFromInline
    internal let timer = AtomicReference<DispatchTimer>()

    /// This node itself, while only its pending limit can still decide it for the consumers it
    /// has: stored when its source lets go of it (see ``detachDownstream(to:)``), tagged once it
    /// is decided.
    @usableFromInline
    internal let keptForLimit = AtomicReference<ChainNode>()

    /// How many of its two deciders, its source and its limit, may still decide it; the one
    /// that is lost last orphans it.
    @usableFromInline
    internal let decidersLeft = Atomic<Int>(2)

    @inlinable
    internal init(holding source: ChainNode?, cancellation: CancellationErrorBox<Failure>?, failure: Failure) {
        pending = AtomicReference(ValueBox(failure))
        super.init(holding: source, cancellation: cancellation)
    }

    /// The link step that the source's handler runs: decides with the source's result, and
    /// withdraws the limit.
    @usableFromInline
    internal static func receive(
        _ source: ChainNode, _ node: ChainNode, _ result: Result<Success, Failure>, _ queue: inout DrainQueue
    ) {
        forward(source, node, result, &queue)
        TimeoutAttemptNode.linked(node).withdrawTimer()
    }

    /// Its source let go of it (released) while its consumers still wait: unless its limit is
    /// lost, the node keeps itself until the limit decides it.
    ///
    /// The limit counts as alive while ``decidersLeft`` counts it, also while it is firing (its
    /// failure taken, its decision not yet published). A decision on its way (the limit revived
    /// the node through its weak reference) runs the handlers itself, so they are left to it: the
    /// node's last release then finds none.
    @usableFromInline
    override internal func detachDownstream(to nodes: inout ReleaseStack) {
        if decidersLeft.load(ordering: .acquiring) == 2 {
            // Kept, or decided meanwhile (its decision runs the handlers), or its limit was lost
            // meanwhile (its last release then drops them).
            _ = keepForLimit()
            return
        }
        if isDecided {
            return
        }
        super.detachDownstream(to: &nodes)
    }

    /// Makes this node keep itself until its limit decides it, unless it is decided; returns
    /// whether it does.
    @usableFromInline
    internal func keepForLimit() -> Bool {
        guard !isDecided else {
            return false
        }
        let (stored, decided) = keptForLimit.storeIfEmpty(self)
        if stored && decided {
            _ = keptForLimit.takeAndTag()  // Decided meanwhile: its decision let go already.
            return false
        }
        return true
    }

    /// Lets go of this node's hold on itself, once it is decided.
    @usableFromInline
    internal func releaseKeptForLimit() {
        _ = keptForLimit.takeAndTag()
    }

    /// The limit's body was released without running: only the source can decide this attempt
    /// now, and if it is lost too, the attempt is orphaned.
    @usableFromInline
    internal func limitLost() {
        guard pending.takeAndTag().object != nil else {
            return  // It fired, or the attempt was decided.
        }
        if decidersLeft.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
            var nodes = ReleaseStack()
            loseDeciders(to: &nodes)
            nodes.releaseAll()
        }
        releaseKeptForLimit()
    }

    /// Keeps the limit's timer, to withdraw it when the attempt is decided otherwise.
    @usableFromInline
    internal func hold(_ timer: DispatchTimer) {
        if self.timer.storeIfEmpty(timer).isTagged {
            timer.withdraw()
        }
    }

    /// Withdraws the limit's timer, if there is one, and any stored later.
    @usableFromInline
    internal func withdrawTimer() {
        timer.takeAndTag().object?.withdraw()
    }

    /// Decides this attempt with the failure, as the limit passes, unless it is decided.
    ///
    /// Whoever learns of the timeout (a callback, a reader, a callback added later) finds the
    /// work it gave up on stopped or finished (unless something else needs it), not still running
    /// for a moment, which a service that starts its next request from the callback would pay;
    /// and a producer whose late result lost to the stop finds the timeout decided. So the limit
    /// claims this attempt's decision, lets go of its source, claiming the source's stop if that
    /// stops it (see ``AttemptNode/releaseUnitClaimingStop(givingBack:to:)``), publishes the
    /// timeout, and only then finishes the stop: runs the producer's cancel handlers and lets go
    /// of the work above. Nobody's code runs between a claim and its publication. This
    /// attempt's callbacks run last.
    @inlinable
    internal func expire() {
        guard let failure = pending.takeAndTag().object else {
            return
        }
        guard claimFillAcquiring() else {
            releaseKeptForLimit()  // Decided otherwise meanwhile.
            return
        }
        let error = unsafeDowncast(failure, to: ValueBox<Failure>.self).value
        // Recorded before anyone can see the timeout, so that a dump taken by whoever learns of
        // it finds the limit passed.
        if isTraced {
            PendingFutures.gaveUp(self, .limitPassedWhileWorkRuns)
        }
        // The work above learns that its consumer's deadline passed.
        var nodes = ReleaseStack(stopReasonBits: DemandState.stoppedByDeadline)
        var stop = StopClaim.none
        var source: AttemptNode<Success, Failure>?
        if let held = takeHeld(as: .settle).held {
            source = AttemptNode<Success, Failure>.source(held)
            stop = source.unsafelyUnwrapped.releaseUnitClaimingStop(givingBack: false, to: &nodes)
            nodes.push(held)
        }
        var queue = DrainQueue()
        queue.parkingCompletions { queue in
            publishDecision(.failure(error), cancelled: false, in: &queue)
            source?.finish(stop, to: &nodes)
            nodes.releaseAll()
        }
        releaseKeptForLimit()
    }

    /// Its source was orphaned while something else holds this node: unless its limit is lost
    /// too, the limit still decides this attempt, which keeps itself until then, whoever lets go
    /// of it meanwhile.
    @usableFromInline
    override internal func lostDecider(to nodes: inout ReleaseStack) {
        if decidersLeft.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
            loseDeciders(to: &nodes)
        } else {
            _ = keepForLimit()
        }
    }

    @usableFromInline
    override internal func dropPendingWork() {
        _ = pending.takeAndTag()
        withdrawTimer()
        releaseKeptForLimit()
    }
}

/// What the body of a limit measured by an executor other than a Dispatch queue captures: the
/// attempt, weakly (so that an attempt decided or dropped early is released early); released
/// unrun (an executor that stopped, a clock that never moves), it tells the attempt that its
/// limit is lost.
@usableFromInline
internal struct LimitBody<Success: Sendable, Failure: Error>: ~Copyable, Sendable {
    @usableFromInline
    internal weak var node: TimeoutAttemptNode<Success, Failure>?

    @inlinable
    internal init(_ node: TimeoutAttemptNode<Success, Failure>) {
        self.node = node
    }

    deinit {
        node?.limitLost()
    }
}

/// The timer of an attempt's time limit on a Dispatch queue: holds the attempt's node weakly,
/// like the body of any other executor's limit, and is itself the work, so that the limit costs
/// no closure until it fires.
///
/// It is not generic: the node is kept as a ``ChainNode``, and `expire` is a closure without
/// captures made where the limit is set, so it runs specialized for the attempt's types and
/// neither the timer nor the expiry looks up generic metadata (a saturated service's limits
/// mostly expire).
@usableFromInline
internal final class LimitTimer: DispatchTimer, @unchecked Sendable {
    // @unchecked: `limited` is a weak reference, which the runtime reads and clears atomically,
    // and it and `expire` are written only at `init`.
    @usableFromInline
    internal weak var limited: ChainNode?

    /// Expires the node in `limited`, whose type it knows (see ``ChainNode/linked(_:)``), or tells
    /// it that it lost its limit (`lost`).
    @usableFromInline
    internal let expire: @Sendable (ChainNode, _ lost: Bool) -> Void

    /// A timer on `queue`, or without one for an executor that keeps it (see ``TimerScheduling``).
    @usableFromInline
    internal init(
        limiting limited: ChainNode, on queue: DispatchQueue?, after nanoseconds: Int,
        expire: @escaping @Sendable (ChainNode, _ lost: Bool) -> Void
    ) {
        self.limited = limited
        self.expire = expire
        super.init(on: queue, after: nanoseconds)
    }

    override package func work() -> @Sendable () -> Void {
        { [self] in runWork() }
    }

    override package func runWork() {
        if let limited {
            expire(limited, false)
        }
    }

    override internal func loseWork() {
        if let limited {
            expire(limited, true)
        }
    }
}
