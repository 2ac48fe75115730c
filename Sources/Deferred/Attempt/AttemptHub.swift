public import Synchronization

/// What an attempt's dependents share to reach it for cancellation: its demand, its producer's
/// cancel handlers, and the demand it holds on the attempts it waits for.
///
/// An attempt's node holds its hub, and so does every dependent that holds a unit of demand on
/// it; the hub holds no node. Values flow down the graph of nodes (a source's handlers hold the
/// attempts derived from it) while demand and cancellation flow up the graph of hubs, so the two
/// never form a cycle: a chain that nobody can finish or cancel any more is released, and a
/// pending attempt keeps exactly what it needs to cancel upstream (the hubs above it and the
/// producer's cancel handlers in them), not the nodes.
///
/// The hub is itself a storage of one `Bool`: filled with `true` when the attempt is cancelled,
/// which runs the producer's cancel handlers once, or with `false` when it finishes otherwise,
/// which releases them unrun.
///
/// A node learns that its hub was cancelled for lack of demand when it next looks (when a step
/// would start, a result arrives, or a reader asks): by then nobody is waiting for it.
@usableFromInline
internal final class AttemptHub: Storage<Bool>, @unchecked Sendable {
    /// The demand; see ``DemandState``.
    @usableFromInline
    internal let demand = Atomic<Int>(DemandState.initial.rawValue)

    /// The units this hub's attempt holds on the hubs of the attempts it waits for: one
    /// ``AttemptHub``, or an ``AttemptHubList``.
    ///
    /// Tagged once the attempt no longer waits.
    @usableFromInline
    internal let upstream = AtomicReference<ChainNode>()

    @inlinable
    internal init(pinned: Bool) {
        super.init()
        if pinned {
            demand.store(DemandState.initial.pinning().rawValue, ordering: .relaxed)
        }
    }

    /// Whether the attempt was cancelled.
    @inlinable
    internal var isCancelled: Bool {
        DemandState(rawValue: demand.load(ordering: .acquiring)).isCancelled
    }

    /// Takes a unit of demand; returns `false` if the attempt was cancelled already.
    @inlinable
    internal func addUnit() -> Bool {
        updateDemand(synchronizing: false) { state in
            if let next = state.adding() { (next, true) } else { (state, false) }
        }
    }

    /// Records a handler that needs the attempt for good.
    @inlinable
    internal func pin() {
        updateDemand(synchronizing: false) { state in (state.pinning(), ()) }
    }

    /// Moves the demand by `transition`, the only place that decides, with one
    /// compare-and-swap loop; returns what the transition that took effect reported.
    ///
    /// `transition` returns the next state and the outcome to report; returning the state it
    /// was given reports the outcome without writing. A `synchronizing` update acquires and
    /// releases (it cancels or finishes the attempt); others are relaxed.
    @inlinable
    internal func updateDemand<Outcome>(
        synchronizing: Bool, _ transition: (DemandState) -> (next: DemandState, outcome: Outcome)
    ) -> Outcome {
        var observed = DemandState(rawValue: demand.load(ordering: .relaxed))
        while true {
            let (next, outcome) = transition(observed)
            if next == observed {
                return outcome
            }
            let (exchanged, original) =
                synchronizing
                ? demand.compareExchange(
                    expected: observed.rawValue, desired: next.rawValue,
                    successOrdering: .acquiringAndReleasing, failureOrdering: .relaxed)
                : demand.compareExchange(
                    expected: observed.rawValue, desired: next.rawValue,
                    successOrdering: .relaxed, failureOrdering: .relaxed)
            if exchanged {
                return outcome
            }
            observed = DemandState(rawValue: original)
        }
    }

    /// Releases a unit held on `hub`, cancelling every attempt that this leaves without demand,
    /// up the graph, with a loop rather than recursion.
    ///
    /// A reader that waited gives its unit back (`returning`), which cancels only if a dependent
    /// gave up meanwhile; see ``DemandState/returning()``.
    @usableFromInline
    internal static func releaseUnit(on hub: AttemptHub, returning: Bool = false) {
        var next: AttemptHub? = hub
        var more: [AttemptHub] = []
        var returning = returning
        while let current = next ?? (more.isEmpty ? nil : more.removeLast()) {
            next = nil
            let cancels = returning ? current.giveBack() : current.release()
            returning = false
            guard cancels else {
                continue
            }
            _ = current.fill(true)
            current.takeUpstream(into: &next, &more)
        }
    }

    /// Gives back a reader's unit; returns whether that cancelled the attempt.
    @inlinable
    internal func giveBack() -> Bool {
        updateDemand(synchronizing: true) { state in
            let (next, cancels) = state.returning()
            return (next, next != state && cancels)
        }
    }

    /// Releases one unit; returns whether that cancelled the attempt.
    @inlinable
    internal func release() -> Bool {
        updateDemand(synchronizing: true) { state in
            let (next, cancels) = state.releasing()
            return (next, next != state && cancels)
        }
    }

    /// Marks the attempt finished, cancelled or not, unless it was already; runs or drops the
    /// cancel handlers and releases the units this attempt held upstream.
    @usableFromInline
    internal func finish(cancelled: Bool) {
        if markFinal(cancelled: cancelled) {
            completeFinish(cancelled: cancelled)
        }
    }

    /// Marks the attempt finished, not cancelled, before its result is published; returns `false`
    /// if it was cancelled (or finished) already.
    ///
    /// From here on, releasing units changes nothing; ``finishSettled()`` completes the finish once
    /// the result is out.
    @usableFromInline
    internal func settle() -> Bool {
        markFinal(cancelled: false)
    }

    /// Completes the finish that ``settle()`` began: drops the cancel handlers unrun and releases
    /// the units held upstream.
    @usableFromInline
    internal func finishSettled() {
        completeFinish(cancelled: false)
    }

    /// Moves to the final state unless the attempt is there already; returns whether it moved.
    private func markFinal(cancelled: Bool) -> Bool {
        updateDemand(synchronizing: true) { state in
            let (next, finishes) = state.finishing(cancelled: cancelled)
            return finishes ? (next, true) : (state, false)
        }
    }

    /// Runs or drops the cancel handlers and releases the units held upstream, for the caller
    /// that moved the attempt to its final state.
    private func completeFinish(cancelled: Bool) {
        _ = fill(cancelled)
        var one: AttemptHub?
        var more: [AttemptHub] = []
        takeUpstream(into: &one, &more)
        if let one {
            Self.releaseUnit(on: one)
        }
        for hub in more {
            Self.releaseUnit(on: hub)
        }
    }

    /// Takes the units held upstream: a single hub goes to `one` if it is empty, the others to
    /// `more`.
    private func takeUpstream(into one: inout AttemptHub?, _ more: inout [AttemptHub]) {
        switch upstream.takeAndTag() {
        case let hub as AttemptHub:
            if one == nil {
                one = hub
            } else {
                more.append(hub)
            }
        case let list as AttemptHubList:
            more.append(contentsOf: list.hubs)
        default:
            break
        }
    }

    /// Runs `handler` once if the attempt is cancelled, at once if it was; drops it if the
    /// attempt finishes otherwise.
    @usableFromInline
    internal func onCancel(_ handler: @escaping @Sendable () -> Void) {
        upon(ImmediateExecutor.shared) { wasCancelled in
            if wasCancelled {
                handler()
            }
        }
    }

    deinit {
        var nodes = ReleaseStack()
        if let held = upstream.take() {
            nodes.push(held)
        }
        nodes.releaseAll()
    }

    @usableFromInline
    override internal func detachDownstream(to nodes: inout ReleaseStack) {
        super.detachDownstream(to: &nodes)
        if let held = upstream.take() {
            nodes.push(held)
        }
    }
}

/// The hubs of several attempts that one attempt waits for at once (a join), each holding one
/// unit of its demand.
///
/// `@unchecked Sendable` is sound because `hubs` is set in `init` and changed only by
/// ``detachDownstream(to:)``, which runs only when nothing else references the list.
@usableFromInline
internal final class AttemptHubList: ChainNode, @unchecked Sendable {
    /// The hubs.
    @exclusivity(unchecked)
    @usableFromInline
    internal var hubs: [AttemptHub]

    @usableFromInline
    internal init(_ hubs: [AttemptHub]) {
        self.hubs = hubs
    }

    deinit {
        var nodes = ReleaseStack()
        detachDownstream(to: &nodes)
        nodes.releaseAll()
    }

    @usableFromInline
    override internal func detachDownstream(to nodes: inout ReleaseStack) {
        for hub in hubs {
            nodes.push(hub)
        }
        hubs = []
    }
}
