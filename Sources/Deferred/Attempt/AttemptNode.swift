public import Synchronization

/// The storage of one attempt: a node of the core's link layer whose value is the attempt's
/// `Result`, plus what cancellation needs: its demand and what it holds upstream.
///
/// An attempt is decided once, like any storage: by a completion (`succeed`, `fail`, a step's
/// result), by a cancellation, or by an orphaning, whichever claims the fill first. A
/// cancellation also sets the *cancelled* flag before the result is published, so everyone who
/// sees the failure also sees that it was a cancellation; `cancel()` after the attempt finished
/// sets only the flag, which withdraws the success and failure callbacks that have not started.
///
/// Each attempt counts its own consumers (see ``DemandState``) and holds, in ``upstream``, what
/// it needs in turn: the attempt it is derived from (a `map`, a `timeout`), the one it waits for
/// now (an `andThen`, a `retry`, a shared run's caller), its inputs (a join), or, for a root, its
/// producer's cancel handlers. So every stage knows its source. When its demand ends (it is
/// decided, or it stops because nobody needs it), it lets go of what it holds at once, on behalf
/// of everything below it, and a source whose last consumer left stops in turn, in one loop.
///
/// A stage holds its source while its source's handler list holds the stage: each link is a
/// cycle until one of them is decided or orphaned (guarantee 17), which breaks it.
///
/// `@unchecked Sendable` is sound as for every storage (see ``DeferredStorage``): the fields
/// added here are atomics or never change after `init`.
@usableFromInline
internal class AttemptNode<Success: Sendable, Failure: Error>: Storage<Result<Success, Failure>>, @unchecked Sendable {
    /// See ``DemandState``.
    @usableFromInline
    internal let flags: Atomic<UInt>

    /// What this attempt holds upstream while its demand lasts.
    ///
    /// A source whose unit it holds (any ``ChainNode`` that counts demand), its inputs' units
    /// (``HeldInputs``), or, marked, its producer's ``CancelHandlers``. Tagged once its demand
    /// ends; see ``endDemand(_:)``.
    @usableFromInline
    internal let upstream: AtomicReference<ChainNode>

    /// Where the cancellation error comes from, or `nil` for the failure type's own.
    @usableFromInline
    internal let cancellation: CancellationErrorBox<Failure>?

    /// Creates a pending attempt that holds a unit of `source`'s demand (see
    /// ``AttemptNode/takeUnit()``), or nothing upstream yet if `source` is `nil`.
    @inlinable
    internal init(holding source: ChainNode? = nil, cancellation: CancellationErrorBox<Failure>?) {
        flags = Atomic(DemandState.initial.rawValue)
        upstream = AtomicReference(source)
        self.cancellation = cancellation
        super.init()
    }

    /// Creates a pending stage that holds `source` if it took a unit of its demand (`held`; see
    /// ``takeUnitIfPending()``), and nothing else takes what it holds (see
    /// ``DemandState/holdsAlone``): a step or a delay.
    @inlinable
    internal init(holdingAlone source: borrowing ChainNode, held: Bool, cancellation: CancellationErrorBox<Failure>?) {
        flags = Atomic(DemandState.holdsAlone)
        if held {
            upstream = AtomicReference(holding: source)
        } else {
            upstream = AtomicReference()
        }
        self.cancellation = cancellation
        super.init()
    }

    /// Creates an attempt that has finished with `result`.
    @inlinable
    internal init(finished result: Result<Success, Failure>, cancellation: CancellationErrorBox<Failure>?) {
        flags = Atomic(DemandState.finished.rawValue)
        upstream = AtomicReference(nil, tagged: true)
        self.cancellation = cancellation
        super.init(filledWith: result)
    }

    deinit {
        // Recorded and never read: settled by the bits, before any generic code runs.
        if waiterRegistry.load(ordering: .relaxed) & traceBits == recordedBit {
            traceRelease()
        }
        // Only a node released pending holds anything here: its consumers are gone, so what it
        // held no longer has it as a consumer. (A node the deadline ledger tracks always holds
        // something until its demand ends, when it leaves the ledger: see `markTracked()`.)
        if !upstream.isEmpty, let held = upstream.take() {
            leaveLedgerIfTracked()
            var nodes = ReleaseStack()
            nodes.pushUnit(held)
            nodes.releaseAll()
        }
    }

    @usableFromInline
    override internal func detachDownstream(to nodes: inout ReleaseStack) {
        super.detachDownstream(to: &nodes)
        if !upstream.isEmpty, let held = upstream.take() {
            leaveLedgerIfTracked()
            nodes.pushUnit(held)
        }
    }

    /// Reports this attempt, recorded by ``PendingFutures``, going away and never read, if it
    /// failed (not cancelled, not abandoned).
    @usableFromInline
    internal final func traceRelease() {
        guard case .failure(let error)? = peek(), !isCancelledFlag,
            !CancellationErrorBox<Failure>.isCancellation(error),
            !(error is AbandonedError)
        else {
            return
        }
        if let abandoned = abandonedError(AbandonedError(writerType: "", file: "", line: 0)),
            String(reflecting: abandoned) == String(reflecting: error)
        {
            return
        }
        if let ownError = cancellation?.value, String(reflecting: ownError) == String(reflecting: error) {
            return
        }
        PendingFutures.releasedFailed(self, failure: String(describing: error))
    }

    override internal var traceName: String {
        "attempt"
    }

    // MARK: Deadlines (see ``DeadlineLedger``)

    /// Tells the deadline ledger that this attempt no longer holds what it took out of
    /// ``upstream``, if the ledger tracks it; before that is released.
    @inlinable
    @inline(__always)
    internal final func leaveLedgerIfTracked() {
        if flags.load(ordering: .sequentiallyConsistent) & DemandState.tracked != 0 {
            DeadlineLedger.shared.leave(self)
        }
    }

    /// Whether the deadline ledger tracks this attempt.
    @inlinable
    internal final var isTracked: Bool {
        flags.load(ordering: .sequentiallyConsistent) & DemandState.tracked != 0
    }

    @usableFromInline
    override internal final func loadDemand() -> UInt? {
        flags.load(ordering: .sequentiallyConsistent)
    }

    /// Marks this attempt tracked; one that holds nothing upstream yet (a root without cancel
    /// handlers) gets an empty store of them, so that it holds something until its demand ends
    /// and its release finds it (see `deinit`), and leaves the ledger either way.
    @usableFromInline
    override internal final func markTracked() -> UInt? {
        let word = flags.bitwiseOr(DemandState.tracked, ordering: .sequentiallyConsistent).oldValue
        // Not into a slot that only its owner writes, with a load and a store (a step's).
        if word & DemandState.holdsAlone == 0 && upstream.isEmpty {
            _ = upstream.storeIfEmptyAndUntagged(CancelHandlers(), marked: true)
        }
        return word
    }

    @usableFromInline
    override internal final var hasTrackedSource: Bool {
        isTracked
    }

    @usableFromInline
    override internal final func currentSource() -> ChainNode? {
        upstream.loadUnmarked()
    }

    @usableFromInline
    override internal final func releaseUnit(givingBack: Bool, to nodes: inout ReleaseStack) {
        releaseOwnUnit(givingBack: givingBack, to: &nodes)
    }

    /// A decided attempt holds nothing upstream, so its release goes no deeper than itself.
    @usableFromInline
    override internal final var hasDecided: Bool {
        isDecided
    }

    @usableFromInline
    override internal final func awaitDecision() {
        if isDecided {
            awaitPublication()
        }
    }

    /// What a node does as its demand ends, besides letting go of what it holds (a retry stops
    /// its loop, a shared run reports its end); called once, by the caller that ended it.
    @usableFromInline
    internal func demandEnded(_ end: DemandEnd) {}

    // MARK: Deciding

    /// Whether the cancelled flag is set.
    @inlinable
    internal final var isCancelledFlag: Bool {
        DemandState(rawValue: flags.load(ordering: .acquiring)).has(DemandState.cancelled)
    }

    /// Whether this attempt has been decided, or is being decided.
    @inlinable
    internal final var isDecided: Bool {
        StorageState(rawValue: state.load(ordering: .acquiring)).isFillClaimed
    }

    /// Decides this attempt unless it is decided already; returns whether this call decided it
    /// with `result`.
    ///
    /// Its demand ends as it is published (see ``endDemand(_:)``): it lets go of what it holds
    /// upstream before a `queue` that is running (or parking, as a time limit's is) runs a single
    /// handler, so the work above that nothing else needs is told to stop first.
    ///
    /// Who ends the demand: for a failure type with a cancellation error, whoever claims the
    /// fill (a stop that loses the claim does nothing more, so a producer told to stop never also
    /// delivers). Without one, a stop cannot decide, so the demand word says which came first
    /// (see ``DemandState/settling(cancelled:)``): if the attempt stopped first, its stopper
    /// ends the demand and the producer's result is published all the same.
    @inlinable
    @discardableResult
    internal final func decide(_ result: Result<Success, Failure>, cancelled: Bool, in queue: inout DrainQueue) -> Bool
    {
        guard claimFillAcquiring() else {
            return false
        }
        publishDecision(result, cancelled: cancelled, in: &queue)
        return true
    }

    /// Publishes the decision of an attempt whose fill the caller claimed, and ends its demand
    /// (see ``decide(_:cancelled:in:)``).
    @inlinable
    internal final func publishDecision(_ result: Result<Success, Failure>, cancelled: Bool, in queue: inout DrainQueue)
    {
        if cancellation.hasNoCancellationError() {
            guard updateDemand({ $0.settling(cancelled: cancelled) }) else {
                publish(result, in: &queue)
                return
            }
        } else if cancelled {
            flags.bitwiseOr(DemandState.cancelled | DemandState.decidedCancelled, ordering: .releasing)
        }
        publish(result, in: &queue)
        endDemand(.settle)
        if cancelled {
            dropPendingWork()
        }
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

    /// Cancels this attempt: stops it if it is pending (see ``stop(to:)``), and in any case
    /// withdraws its success and failure callbacks that have not started.
    ///
    /// Returns only once the result is visible, whoever decided it.
    @inlinable
    internal final func cancel() {
        var nodes = ReleaseStack(stopReasonBits: DemandState.stoppedByCancel)
        if let error = cancellationError {
            if claimFillAcquiring() {
                decideStopped(with: error, to: &nodes)
                nodes.releaseAll()
                return
            }
            flags.bitwiseOr(DemandState.cancelled, ordering: .releasing)
        } else if updateDemand({ $0.cancelling() }) {
            endDemand(.stop, to: &nodes)
            nodes.releaseAll()
        }
        if isDecided {
            awaitPublication()
        }
    }

    /// Whether a step of this attempt may start now: it is pending.
    @inlinable
    internal final var mayStartStep: Bool {
        !isDecided
    }

    /// Whether this attempt's producer was told to stop: it was decided as cancelled, or, for a
    /// failure type without a cancellation error, nobody needs it any more or it was cancelled.
    @inlinable
    internal final var isStopped: Bool {
        let state = DemandState(rawValue: flags.load(ordering: .acquiring))
        return cancellation.hasNoCancellationError() ? state.isStopped : state.has(DemandState.decidedCancelled)
    }

    // MARK: Reading

    /// Whether the attempt was cancelled; once this is `true`, the result is visible, unless the
    /// failure type has no cancellation error (then its producer was told to stop).
    ///
    /// A decision under way is awaited first: it may yet find the attempt stopped and decide
    /// it as cancelled, and a reader told of that (a time limit's callback that stopped the
    /// work) must not see it neither cancelled nor finished.
    @inlinable
    internal final var isCancelled: Bool {
        if isDecided && !isFilled {
            awaitPublication()
        }
        // Without a cancellation error, a stop cannot decide the attempt: it is cancelled once
        // its producer was told to stop, also because nobody needs it any more.
        return isCancelledFlag || (cancellation.hasNoCancellationError() && isStopped)
    }
}
