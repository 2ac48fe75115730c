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
    internal let demand = Atomic<UInt>(DemandState.initial.bits)

    /// The units this hub's attempt holds on the hubs of the attempts it waits for: one
    /// ``AttemptHub`` (marked if the unit is a path unit), or ``DemandUnits``.
    ///
    /// Tagged once the attempt no longer waits.
    @usableFromInline
    internal let upstream: AtomicReference<ChainNode>

    /// The side units held on this hub; see ``SideDemand``.
    @usableFromInline
    internal let sides = AtomicReference<SideDemand>()

    /// `unit` as ``upstream`` keeps it: a plain or path unit as its hub, marked for the path; a
    /// side unit in a list.
    @inlinable
    internal static func upstreamEntry(_ unit: DemandUnit?) -> (held: ChainNode?, marked: Bool) {
        guard let unit else {
            return (nil, false)
        }
        if unit.isSide {
            return (DemandUnits([unit]), false)
        }
        return (unit.hub, unit.depth == DemandUnit.path)
    }

    @inlinable
    internal init(pinned: Bool) {
        upstream = AtomicReference()
        super.init()
        if pinned {
            demand.store(DemandState.initial.pinning().bits, ordering: .relaxed)
        }
    }

    /// Creates the hub of an attempt that holds `unit` upstream from the start: set as it is
    /// made, before anyone else sees the hub, so without an atomic step.
    @inlinable
    internal init(holding unit: DemandUnit) {
        let (held, marked) = Self.upstreamEntry(unit)
        upstream = AtomicReference(held, marked: marked)
        super.init()
    }

    /// Whether the attempt was cancelled.
    @inlinable
    internal var isCancelled: Bool {
        DemandState(bits: demand.load(ordering: .acquiring)).isCancelled
    }

    /// Takes a unit of demand at `depth` (see ``DemandUnit``); returns `false` if the attempt was
    /// cancelled already.
    ///
    /// A side unit is counted in ``sides`` first, and the demand moves with release ordering,
    /// so that a stage that sees the path unit released also sees the side units taken before.
    @inlinable
    internal func addUnit(depth: Int = 0) -> Bool {
        let side = DemandUnit(self, depth: depth).isSide
        if side {
            adjustSide(depth, by: 1)
        }
        let added = updateDemand { state in
            if let next = state.adding(path: depth == DemandUnit.path) { (next, true) } else { (state, false) }
        }
        if side && !added {
            adjustSide(depth, by: -1)
        }
        return added
    }

    /// Takes a new path unit from a stage that keeps its own; returns `false` if the attempt was
    /// cancelled already.
    ///
    /// The kept unit was counted as a side unit (``AttemptNode/takePath(countingSidesOn:)``),
    /// and the new one is the path unit in its place, so the number of path units does not
    /// change.
    @usableFromInline
    internal func takePathFromConvertedUnit() -> Bool {
        updateDemand { state in
            if let next = state.adding() { (next, true) } else { (state, false) }
        }
    }

    /// Records a handler that needs the attempt for good.
    @inlinable
    internal func pin() {
        updateDemand { state in (state.pinning(), ()) }
    }

    /// Moves the demand by `transition`, the only place that decides, through
    /// ``Synchronization/Atomic/update(from:_:)``; returns what the transition that took
    /// effect reported.
    ///
    /// `transition` returns the next state and the outcome to report; returning the state it
    /// was given reports the outcome without writing.
    @inlinable
    internal func updateDemand<Outcome>(_ transition: (DemandState) -> (next: DemandState, outcome: Outcome)) -> Outcome
    {
        var outcome: Outcome?
        _ = demand.update { observed in
            let (next, reported) = transition(DemandState(bits: observed))
            outcome = reported
            return next.bits == observed ? nil : next.bits
        }
        return outcome.unsafelyUnwrapped
    }

    /// Releases `unit`, cancelling every attempt that this leaves without demand, up the graph,
    /// with a loop rather than recursion.
    ///
    /// A reader that waited gives its unit back (`returning`), which cancels only if a dependent
    /// gave up meanwhile; see ``DemandState/returning()``.
    @usableFromInline
    internal static func releaseUnit(_ unit: DemandUnit, returning: Bool = false) {
        var next: DemandUnit? = unit
        var more: [DemandUnit] = []
        var returning = returning
        while let current = next ?? more.popLast() {
            next = nil
            let cancels = current.hub.release(current.depth, returning: returning)
            returning = false
            guard cancels else {
                continue
            }
            current.hub.fillAsSoleFiller(true)
            current.hub.takeUpstream(into: &next, &more)
        }
    }

    /// Releases one unit at `depth` (given back by a reader if `returning`); returns whether
    /// that cancelled the attempt.
    @usableFromInline
    internal func release(_ depth: Int, returning: Bool) -> Bool {
        let path = depth == DemandUnit.path
        let cancels = updateDemand { state in
            let (next, cancels) = returning ? state.returning() : state.releasing(path: path)
            return (next, next != state && cancels)
        }
        if DemandUnit(self, depth: depth).isSide {
            adjustSide(depth, by: -1)
        }
        return cancels
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
    /// From here on, releasing units no longer cancels it; ``finishSettled()`` completes the finish once
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
        updateDemand { state in
            let (next, finishes) = state.finishing(cancelled: cancelled)
            return finishes ? (next, true) : (state, false)
        }
    }

    /// Runs or drops the cancel handlers and releases the units held upstream, for the caller
    /// that moved the attempt to its final state.
    private func completeFinish(cancelled: Bool) {
        // Only the caller that moved the demand to its final state gets here, once.
        fillAsSoleFiller(cancelled)
        let (held, marked) = upstream.takeAndTag()
        HeldUnits(held, marked: marked).release()
    }

    /// Takes the units held upstream: a single unit goes to `one` if it is empty, the others to
    /// `more`.
    private func takeUpstream(into one: inout DemandUnit?, _ more: inout [DemandUnit]) {
        let (held, marked) = upstream.takeAndTag()
        switch HeldUnits(held, marked: marked) {
        case .one(let unit) where one == nil:
            one = unit
        case .one(let unit):
            more.append(unit)
        case .many(let list):
            more.append(contentsOf: list.units)
        case .none:
            break
        }
    }

    /// Makes this hub's attempt hold `units` upstream in place of what it held, unless it
    /// finished; returns whether it did and the units it held before.
    @usableFromInline
    internal func holdUpstream(_ units: [DemandUnit]) -> (held: Bool, previous: HeldUnits) {
        if units.count == 1 {
            return holdUpstream(units[0])
        }
        return exchangeUpstream(units.isEmpty ? nil : DemandUnits(units), marked: false)
    }

    /// Makes this hub's attempt hold `unit` (or nothing) upstream in place of what it held,
    /// unless it finished; returns whether it did and the units it held before.
    @usableFromInline
    internal func holdUpstream(_ unit: DemandUnit?) -> (held: Bool, previous: HeldUnits) {
        let (held, marked) = Self.upstreamEntry(unit)
        return exchangeUpstream(held, marked: marked)
    }

    private func exchangeUpstream(_ held: ChainNode?, marked: Bool) -> (held: Bool, previous: HeldUnits) {
        let (exchanged, previous, previousMarked) = upstream.exchangeUnlessTagged(held, marked: marked)
        return (exchanged, HeldUnits(previous, marked: previousMarked))
    }

    /// Runs `handler` once if the attempt is cancelled, at once if it was; drops it if the
    /// attempt finishes otherwise.
    @usableFromInline
    internal func onCancel(_ handler: @escaping @Sendable () -> Void) {
        add(.cancelHandler(UnretainedImmediateExecutor(), handler))
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
