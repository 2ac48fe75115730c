public import Synchronization

/// The storage of one attempt: a node of the core's link layer whose value is the attempt's
/// `Result`, plus what cancellation needs.
///
/// An attempt is decided once, like any storage: by a completion (`succeed`, `fail`, a step's
/// result) or by a cancellation, whichever claims the fill first. A cancellation also sets the
/// *cancelled* flag before the result is published, so everyone who sees the failure also sees
/// that it was a cancellation; `cancel()` after the attempt finished sets only the flag, which
/// withdraws the success and failure callbacks that have not started.
///
/// Three roles, fixed when the node is made:
/// - A *root* (`DeferredAttempt`, `Attempt(upon:catching:)` and the like) owns a hub, made on first use,
///   where its dependents hold demand and its producer's cancel handlers wait.
/// - A *transparent* node (`map`, `mapError`, `recover`, `delay`) shares its source's
///   hub, a level deeper on its path (see ``DemandState``): it lives and dies with its source,
///   holding the path unit there until a dependent continues the path. A second transparent
///   node derived from the same attempt starts a hub of its own instead, holding a unit on its
///   source's hub as an owner does.
/// - An *owner* (`andThen`, `fallback`, `retry`, the joins) owns a hub whose units upstream are
///   the attempts it waits for; it switches them as it moves on. A `timeout` is transparent in
///   what it passes on but starts a hub of its own, holding the path unit of its source's, so
///   that it lets go of its source as soon as its limit passes.
///
/// `@unchecked Sendable` is sound as for every storage (see ``DeferredStorage``): the fields
/// added here are atomics or never change after `init`.
@usableFromInline
internal class AttemptNode<Success: Sendable, Failure: Error>: Storage<Result<Success, Failure>>, @unchecked Sendable {
    /// See ``AttemptFlags``.
    @usableFromInline
    internal let flags: Atomic<UInt>

    /// The hub where dependents of this attempt hold demand: its own (a root's is made on first
    /// use) or its source's.
    ///
    /// The tag marks an owner that has finished.
    ///
    /// The node needs no `deinit` of its own: the slot's releases the hub, whose own `deinit`
    /// releases what it holds upstream through a ``ReleaseStack``, so dropping a node goes a
    /// level or two deep whatever the chain above it.
    ///
    /// A release that finds the node unreferenced detaches only its handlers and leaves the hub
    /// here: a pending time limit holds the node weakly and may revive it at that moment to
    /// decide it, which reads the hub (see ``ChainNode/detachDownstream(to:)``).
    @usableFromInline
    internal let hubSlot: AtomicReference<AttemptHub>

    /// Where the cancellation error comes from, or `nil` for the failure type's own.
    @usableFromInline
    internal let cancellation: CancellationErrorSource<Failure>?

    /// Creates a pending root, whose hub is made on first use.
    @inlinable
    internal init(cancellation: CancellationErrorSource<Failure>?) {
        flags = Atomic(AttemptFlags.ownsHub)
        hubSlot = AtomicReference()
        self.cancellation = cancellation
        super.init()
    }

    /// Creates a pending owner with a hub of its own.
    @inlinable
    internal init(owningHubWith cancellation: CancellationErrorSource<Failure>?) {
        flags = Atomic(AttemptFlags.ownsHub)
        hubSlot = AtomicReference(AttemptHub(pinned: false))
        self.cancellation = cancellation
        super.init()
    }

    /// Creates a pending transparent node with the demand its source gave it.
    @inlinable
    internal init(derived demand: DerivedDemand, cancellation: CancellationErrorSource<Failure>?) {
        flags = Atomic(demand.flags)
        hubSlot = AtomicReference(demand.hub)
        self.cancellation = cancellation
        super.init()
    }

    /// Creates a root that has finished with `result`.
    @inlinable
    internal init(finished result: Result<Success, Failure>, cancellation: CancellationErrorSource<Failure>?) {
        flags = Atomic(AttemptFlags.ownsHub)
        hubSlot = AtomicReference(nil, tagged: true)
        self.cancellation = cancellation
        super.init(filledWith: result)
    }

    /// Whether the hub in ``hubSlot`` is this attempt's own: a flag rather than a field of its
    /// own, which would make a `map` node too large for the allocator's fast bins.
    @inlinable
    internal final var ownsHub: Bool {
        AttemptFlags(rawValue: flags.load(ordering: .relaxed)).has(AttemptFlags.ownsHub)
    }

    // MARK: Deciding

    /// Whether the cancelled flag is set.
    @inlinable
    internal final var isCancelledFlag: Bool {
        AttemptFlags(rawValue: flags.load(ordering: .acquiring)).has(AttemptFlags.cancelled)
    }

    /// Whether this attempt has been decided, or is being decided.
    @inlinable
    internal final var isDecided: Bool {
        StorageState(rawValue: state.load(ordering: .acquiring)).isFillClaimed
    }

    /// Decides this attempt unless it is decided already; returns whether this call decided it
    /// with `result`.
    ///
    /// An attempt with a hub of its own settles it first, so that nothing released while the
    /// pending handlers run (through `queue`) can cancel it any more; if the hub was cancelled
    /// for lack of demand before that, the attempt is decided as cancelled instead, so that a
    /// producer told to stop never also delivers. A cancellation is published first and then
    /// released, so the producer's cancel handlers see the result.
    @inlinable
    @discardableResult
    internal final func decide(_ result: Result<Success, Failure>, cancelled: Bool, in queue: inout DrainQueue) -> Bool
    {
        guard claimFillAcquiring() else {
            return false
        }
        guard !cancelled else {
            flags.bitwiseOr(AttemptFlags.cancelled | AttemptFlags.decidedCancelled, ordering: .releasing)
            publish(result, in: &queue)
            // After the publication: what it releases may run code that reads this attempt.
            dropPendingWork()
            releaseDemandOnceDecided(cancelled: true)
            return true
        }
        // The node keeps its hub while it runs, so the hub is borrowed, not retained. The tag
        // tells a hub made later that the attempt finished: a hub made already needs none.
        guard ownsHub, let settled = hubSlot.withBorrowedObject({ $0.settle() }) ?? hubSlot.setTag().object?.settle()
        else {
            publish(result, in: &queue)
            releaseDemandOnceDecided(cancelled: false)
            return true
        }
        if settled {
            publish(result, in: &queue)
            hubSlot.withBorrowedObject { $0.finishSettled() }
            return true
        }
        return decideAfterLosingDemand(result, in: &queue)
    }

    /// Decides this attempt after its hub was cancelled for lack of demand.
    ///
    /// The caller claimed the fill. The attempt is decided as cancelled if its failure type has
    /// a cancellation error, else with `result`; returns whether it was decided with `result`.
    ///
    /// Apart from ``decide(_:cancelled:in:)`` so that the common path makes no `Failure?` or
    /// `Result` of its own (unoptimized, their metadata would be looked up on every call).
    @usableFromInline
    internal final func decideAfterLosingDemand(_ result: Result<Success, Failure>, in queue: inout DrainQueue) -> Bool
    {
        if let error = cancellationError {
            flags.bitwiseOr(AttemptFlags.cancelled | AttemptFlags.decidedCancelled, ordering: .releasing)
            publish(.failure(error), in: &queue)
            dropPendingWork()
            return false
        }
        publish(result, in: &queue)
        return true
    }

    /// Decides this attempt with its own result, in a drain of its own.
    @inlinable
    @discardableResult
    internal final func decide(_ result: Result<Success, Failure>, cancelled: Bool = false) -> Bool {
        var queue = DrainQueue()
        defer { queue.drain() }
        return decide(result, cancelled: cancelled, in: &queue)
    }

    /// One of this attempt's deciders is gone (a link to it will never run): unless another can
    /// still decide it (an override says so), it is orphaned, or fails as abandoned where its
    /// failure type can say so.
    @usableFromInline
    override internal func lostDecider(to nodes: inout ReleaseStack) {
        loseDeciders(to: &nodes)
    }

    /// Whether a body submitted for this attempt was released unrun and left it waiting.
    ///
    /// See ``SubmittedBody``. A body that decides the attempt when it runs (its work, its step,
    /// a delay's timer) never ran if the attempt is undecided. A node whose body does more
    /// overrides this.
    @usableFromInline
    internal var isWaitingForDroppedBody: Bool {
        !isDecided
    }

    /// Releases the step of an attempt that lost its deciders (see ``loseDeciders(to:)``): its
    /// source's handler, or the body that would run the step, was released unrun, so nothing
    /// else touches the step any more.
    @usableFromInline
    internal func dropUnrunStep() {}

    /// Releases what a pending timer would deliver or start for this attempt (a delayed result,
    /// a retry's work), once it is decided as cancelled: a timer keeps nothing of a cancelled
    /// attempt but the node.
    @usableFromInline
    internal func dropPendingWork() {}

    /// The error this attempt fails with when it is cancelled, if its failure type has one.
    @inlinable
    internal final var cancellationError: Failure? {
        cancellation.cancellationError()
    }

    /// Decides this attempt as cancelled, unless it is decided already or has no cancellation
    /// error; returns whether this call decided it.
    @usableFromInline
    internal final func decideCancelled(in queue: inout DrainQueue) -> Bool {
        guard !isDecided, let error = cancellationError else {
            return false
        }
        return decide(.failure(error), cancelled: true, in: &queue)
    }

    /// Cancels this attempt: decides it as cancelled if it is pending, and in any case withdraws
    /// its success and failure callbacks that have not started.
    ///
    /// Returns only once the result is visible, whoever decided it.
    @usableFromInline
    internal final func cancel() {
        var queue = DrainQueue()
        if decideCancelled(in: &queue) {
            queue.drain()
            return
        }
        flags.bitwiseOr(AttemptFlags.cancelled, ordering: .releasing)
        if isDecided {
            awaitPublication()
        } else {
            // The failure type has no cancellation error: the attempt finishes with its own
            // result, but nobody waits for what it waits for any more.
            releaseDemand(cancelled: true)
        }
    }

    /// Decides this attempt as cancelled if nobody needs it any more: its hub was cancelled
    /// for lack of demand while it was pending, or, for a stage on a path, nothing holds a unit
    /// that needs it.
    @inlinable
    internal final func settleIfUnneeded() {
        guard !isDecided, isUnneeded else {
            return
        }
        var queue = DrainQueue()
        _ = decideCancelled(in: &queue)
        queue.drain()
    }

    /// Whether nobody needs this attempt any more: its own hub was cancelled for lack of
    /// demand, or, for a stage on its source's path, ``AttemptHub/needs(depth:)`` says so.
    ///
    /// Reads the hub without retaining it: a node takes its hub out of ``hubSlot`` only when it
    /// is destroyed, and the caller is running one of its methods.
    @inlinable
    @inline(__always)
    internal final var isUnneeded: Bool {
        let observed = AttemptFlags(rawValue: flags.load(ordering: .relaxed))
        return hubSlot.withBorrowedObject { hub in
            observed.has(AttemptFlags.ownsHub) ? hub.isCancelled : !hub.needs(depth: observed.depth)
        } ?? false
    }

    /// Whether a step of this attempt may start now: it is pending and still needed.
    ///
    /// An attempt that nobody needs any more is decided as cancelled here instead.
    @inlinable
    internal final func mayStartStep(in queue: inout DrainQueue) -> Bool {
        guard !isDecided else {
            return false
        }
        if isUnneeded, decideCancelled(in: &queue) {
            return false
        }
        return !isDecided
    }

    // MARK: Reading

    /// Whether the attempt was cancelled; once this is `true`, the result is visible.
    ///
    /// A decision under way is awaited first: its decider may yet find the attempt's demand
    /// gone and decide it as cancelled, and a reader told of that (a time limit's callback
    /// that stopped the work) must not see it neither cancelled nor finished.
    @inlinable
    internal final var isCancelled: Bool {
        settleIfUnneeded()
        if isDecided && !isFilled {
            awaitPublication()
        }
        return isCancelledFlag
    }

    /// The result, if the attempt has finished.
    @inlinable
    internal final func settledPeek() -> Result<Success, Failure>? {
        if let result = peek() {
            return result
        }
        settleIfUnneeded()
        return peek()
    }
}
