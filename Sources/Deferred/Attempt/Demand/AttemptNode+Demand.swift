public import Synchronization

/// The shell of ``DemandState``: each event is one atomic step on the node's ``AttemptNode/flags``,
/// and what it returns is carried out here.
extension AttemptNode {
    /// Applies `event` to the demand with one atomic step (none if it changes nothing), and
    /// returns what it reported.
    @inlinable
    @inline(__always)
    internal final func updateDemand<Outcome>(_ event: (DemandState) -> (DemandState, Outcome)) -> Outcome {
        var outcome: Outcome?
        _ = flags.update { observed in
            let (next, reported) = event(DemandState(rawValue: observed))
            outcome = reported
            return next.rawValue == observed ? nil : next.rawValue
        }
        return outcome.unsafelyUnwrapped
    }

    /// Takes a unit of this attempt's demand for a consumer; returns `false` if its demand has
    /// ended, in which case the consumer holds nothing (its link brings the result, or the
    /// cancellation).
    ///
    /// A reader takes it so (a task awaiting `get()`, a blocking wait, a shared run's caller): if
    /// the deadline ledger tracks this attempt, it learns of a consumer without a deadline.
    @inlinable
    internal final func takeUnit() -> Bool {
        let (taken, tracked) = updateDemand { state in
            if let next = state.taking() {
                (next, (true, state.has(DemandState.tracked)))
            } else {
                (state, (false, false))
            }
        }
        if tracked {
            DeadlineLedger.shared.consumerArrived(on: self)
        }
        return taken
    }

    /// Takes a unit of this attempt's demand for a stage, which tells the deadline ledger itself
    /// once it holds the unit (see ``hold(taken:)`` and ``Attempt/attach(_:_:tracksItself:)``).
    @inlinable
    internal final func takeUnitForStage() -> Bool {
        updateDemand { state in
            if let next = state.taking() { (next, true) } else { (state, false) }
        }
    }

    /// This attempt, with a unit of its demand taken, for a consumer to hold in its
    /// ``upstream``; `nil` if its demand has ended.
    @inlinable
    internal final func heldByConsumer() -> ChainNode? {
        takeUnitIfPending() ? self : nil
    }

    /// Takes a unit of this attempt's demand for a stage unless it is decided (a consumer then
    /// needs nothing upstream); returns whether it took one.
    @inlinable
    internal final func takeUnitIfPending() -> Bool {
        !isDecided && takeUnitForStage()
    }

    /// Releases a unit of this attempt's demand (see ``ChainNode/releaseUnit(givingBack:to:)``),
    /// stopping it if that leaves it without demand; an attempt that is decided has no demand
    /// left to count.
    @inlinable
    internal final func releaseOwnUnit(givingBack: Bool, to nodes: inout ReleaseStack) {
        let stop = releaseUnitClaimingStop(givingBack: givingBack, to: &nodes)
        if stop != .none {
            finish(stop, to: &nodes)
        }
    }

    /// Releases a unit of this attempt's demand as ``releaseOwnUnit(givingBack:to:)`` does, up to
    /// the claim of the stop it makes (see ``claimStop()``), which the caller finishes with
    /// ``finish(_:to:)``.
    ///
    /// A time limit lets go of its source this way as it fires (see
    /// ``TimeoutAttemptNode/expire()``): it claims its own decision, claims the stop of the work
    /// it gave up on, publishes its decision, then finishes the stop, running nothing in between.
    /// So whoever sees the timeout finds the work stopped (a reader of a claimed attempt waits
    /// for its publication), and whoever loses to the stop (the producer's late `succeed`) finds
    /// the timeout.
    @inlinable
    @inline(__always)
    internal final func releaseUnitClaimingStop(givingBack: Bool, to nodes: inout ReleaseStack) -> StopClaim {
        guard !isDecided else {
            if !isFilled {
                // Its decider may still be publishing: whatever this release lets run next (a time
                // limit's timeout) sees that result. Never this thread's claim (see `claimStop()`).
                awaitPublication()
            }
            return .none
        }
        let (stops, tracked) = updateDemand { state in
            let (next, stops) = givingBack ? state.givingBack() : state.releasing(reason: nodes.stopReasonBits)
            return (next, (stops, state.has(DemandState.tracked)))
        }
        guard stops else {
            if tracked {
                DeadlineLedger.shared.consumerArrived(on: self)  // One fewer consumer counts.
            }
            consumerLeft(to: &nodes)
            return .none
        }
        return claimStop()
    }

    /// Records a handler that needs this attempt for good: from now on only `cancel()`, or a
    /// cancellation of what it waits for, stops it.
    ///
    /// If the deadline ledger tracks the attempt, it learns of a consumer without a deadline. (The
    /// check is a load after the read-modify-write: the ledger marks an attempt with one too, so
    /// either the ledger reads the pin or this reads the mark.)
    @inlinable
    internal final func pin() {
        flags.bitwiseOr(DemandState.pinned, ordering: .relaxed)
        if flags.load(ordering: .relaxed) & DemandState.tracked != 0 {
            DeadlineLedger.shared.consumerArrived(on: self)
        }
        // A handler added to a finished attempt runs at once, without being stored: it is a
        // reader all the same.
        if isTraced {
            traceObserved()
        }
    }

    /// Carries out a stop that the caller's event made (see ``DemandState``), handing what it
    /// lets go of to `nodes`: an attempt with a cancellation error is decided as cancelled unless
    /// something decided it first (which then ends its demand, and whose result is visible when
    /// this returns); one without runs its producer's cancel handlers and lets go of what it holds
    /// upstream, and stays pending.
    @usableFromInline
    internal final func stop(to nodes: inout ReleaseStack) {
        finish(claimStop(), to: &nodes)
    }

    /// The part of a stop that runs no code of anyone's: claims the fill to decide this attempt
    /// as cancelled, if its failure type has a cancellation error, and marks it so.
    ///
    /// Out of line, as ``finish(_:to:)`` is: a release that stops nothing (the common case) then
    /// looks up no metadata of the failure type.
    @usableFromInline
    internal final func claimStop() -> StopClaim {
        if cancellation.hasNoCancellationError() {
            return .tellProducer
        }
        guard claimFillAcquiring() else {
            // Another party claimed the fill and is publishing: whatever this stop lets run next
            // (a time limit's callbacks, say) sees that result, as a losing `cancel()` would
            // (guarantee 12). No party runs code between its claim and its publication, so this
            // never waits for its own thread.
            awaitPublication()
            return .none
        }
        flags.bitwiseOr(DemandState.stopMarks, ordering: .releasing)  // `decidingCancelled()`
        return .claimed
    }

    /// Finishes a stop that ``claimStop()`` began: publishes the cancellation it claimed, or
    /// tells the producer of an attempt that cannot fail by cancellation.
    @usableFromInline
    internal final func finish(_ stop: StopClaim, to nodes: inout ReleaseStack) {
        switch stop {
        case .none:
            return
        case .claimed:
            publishStop(cancellationError.unsafelyUnwrapped, to: &nodes)
        case .tellProducer:
            endDemand(.stop, to: &nodes)
        }
    }

    /// Decides this attempt, whose fill the caller claimed to stop it, as cancelled with `error`.
    @inlinable
    internal final func decideStopped(with error: Failure, to nodes: inout ReleaseStack) {
        // `decidingCancelled()`, by a cancellation.
        flags.bitwiseOr(DemandState.stopMarks | DemandState.stoppedByCancel, ordering: .releasing)
        publishStop(error, to: &nodes)
    }

    /// Publishes the cancellation of a stop whose claim marked this attempt cancelled.
    ///
    /// Then runs the producer's cancel handlers (which see it) and lets go of what it holds
    /// upstream. The attempt's own handlers wait in `nodes` until everything above has been
    /// stopped.
    @inlinable
    internal final func publishStop(_ error: Failure, to nodes: inout ReleaseStack) {
        publish(.failure(error), in: &nodes.completions)
        endDemand(.stop, to: &nodes)
        dropPendingWork()
    }

    /// Ends this attempt's demand, for the one caller whose event ended it: lets go of what it
    /// holds upstream, in a release loop of its own if that may stop anything.
    @inlinable
    internal final func endDemand(_ end: DemandEnd) {
        let (held, byDropping) = takeHeld(as: end)
        if let held, !byDropping {
            var nodes = ReleaseStack()
            nodes.pushUnit(held)
            nodes.releaseAll()
        }
        demandEnded(end)
    }

    /// Ends this attempt's demand, handing what it held upstream to the caller's release loop,
    /// `nodes`.
    @usableFromInline
    internal final func endDemand(_ end: DemandEnd, to nodes: inout ReleaseStack) {
        let (held, byDropping) = takeHeld(as: end)
        if let held {
            if !byDropping {
                nodes.pushUnit(held)
            } else if end == .stop {
                // Its decider may still be publishing: whatever this stop lets run next (a time
                // limit's timeout) sees that result, as a release of a unit would.
                held.awaitDecision()
            }
        }
        demandEnded(end)
    }

    /// Takes what this attempt holds upstream as its demand ends, tagging the slot, and whether
    /// releasing it is only dropping the reference (a source that is decided already, read
    /// borrowed so that asking retains nothing).
    ///
    /// A node that holds alone takes it with a load and a store (see ``DemandState/holdsAlone``).
    /// The producer's cancel handlers, which a root keeps there, stay in the slot (see
    /// ``onCancel(_:)``): they run here if the attempt stopped, and are released unrun if it
    /// settled.
    @inlinable
    @inline(__always)
    internal final func takeHeld(as end: DemandEnd) -> (held: ChainNode?, byDropping: Bool) {
        if DemandState(rawValue: flags.load(ordering: .relaxed)).has(DemandState.holdsAlone) {
            let (held, byDropping) = upstream.takeAloneAndTag { $0.hasDecided }
            leaveLedgerIfTracked()
            return (held, byDropping)
        }
        let (held, handlers) = upstream.tagTakingUnmarked()
        leaveLedgerIfTracked()
        if handlers {
            // Borrowed: they stay in the slot.
            _ = upstream.withLoaded(as: CancelHandlers.self) { $0.fillAsSoleFiller(end == .stop ? stopReason : nil) }
        }
        return (held, false)
    }

    /// Makes this attempt hold a unit of `source`'s demand instead of what it held, unless its
    /// demand has ended; returns `false` then, holding nothing.
    ///
    /// What an owner calls as it moves on to the next attempt it waits for. A `source` whose
    /// demand has ended (it has its result, or was cancelled) is held by nothing.
    @inlinable
    @discardableResult
    internal final func hold<SourceSuccess, SourceFailure>(_ source: AttemptNode<SourceSuccess, SourceFailure>?) -> Bool
    {
        hold(taken: source?.heldByConsumer())
    }

    /// Makes this attempt hold `held`, whose units are taken already, instead of what it held,
    /// unless its demand has ended; returns `false` then, releasing `held`'s units.
    ///
    /// `tracked`, if given, is whether `held` has a source that the deadline ledger tracks, read
    /// after its units were taken (as a join reads its inputs while it takes them).
    @usableFromInline
    @discardableResult
    internal final func hold(taken held: ChainNode?, tracked: Bool? = nil) -> Bool {
        let (exchanged, previous, _) = upstream.exchangeUnlessTagged(held)
        if exchanged {
            if isTracked {
                DeadlineLedger.shared.reconcile(self)  // It now counts on `held`, not on `previous`.
            } else if let held, tracked ?? held.hasTrackedSource {
                DeadlineLedger.shared.track(self, own: nil)  // Its deadlines now reach `held`.
            }
        }
        guard previous != nil || (!exchanged && held != nil) else {
            return exchanged
        }
        var nodes = ReleaseStack()
        if let previous {
            nodes.pushUnit(previous)
        }
        if !exchanged, let held {
            nodes.pushUnit(held)
        }
        nodes.releaseAll()
        return exchanged
    }

    /// Registers a cancel handler of this attempt's producer: it runs once if the attempt
    /// stops (at once if it has), and is released unrun if the attempt settles first.
    ///
    /// The handlers wait in a ``CancelHandlers`` storage, marked in ``upstream``, where it stays
    /// until the node is destroyed once it is there: so it can be read without being retained.
    @usableFromInline
    internal final func onCancel(_ handler: @escaping @Sendable () -> Void) {
        let added = withCancelHandlers { handlers in
            handlers.add(.cancelHandler(HandlerAnchor(), handler))
        }
        if !added && isStopped {
            handler()  // Its demand ended before any handler came.
        }
    }

    /// Registers a cancel handler of this attempt's producer that learns why the attempt stopped;
    /// see ``onCancel(_:)``.
    @usableFromInline
    internal final func onCancel(reporting handler: @escaping @Sendable (CancellationReason) -> Void) {
        let added = withCancelHandlers { handlers in
            handlers.add(
                .immediate(HandlerAnchor()) { reason in
                    if let reason {
                        handler(reason)
                    }
                })
        }
        if !added && isStopped {
            handler(stopReason)
        }
    }

    /// Calls `body` with the storage of this root's cancel handlers, made on first use and
    /// borrowed, not retained (it stays until the node is destroyed); returns `false` without
    /// calling it if its demand ended before any handler came.
    @inlinable
    @inline(__always)
    internal final func withCancelHandlers(_ body: (CancelHandlers) -> Void) -> Bool {
        if upstream.isEmpty {
            _ = upstream.storeIfEmptyAndUntagged(CancelHandlers(), marked: true)
        }
        return upstream.withLoaded(as: CancelHandlers.self, body) != nil
    }

    /// Why this attempt stopped, once it has: its stop was a cancellation, a deadline that passed,
    /// or the departure of its last consumer.
    @inlinable
    internal final var stopReason: CancellationReason {
        DemandState(rawValue: flags.load(ordering: .acquiring)).stopReason
    }

}
/// A producer's cancel handlers, held (marked) in a root attempt's ``AttemptNode/upstream``: a
/// storage of an optional ``CancellationReason``, filled once by whoever ends the attempt's
/// demand: with why it stopped, which runs them, or with `nil` as it settles, which releases them
/// unrun.
@usableFromInline
internal final class CancelHandlers: Storage<CancellationReason?>, @unchecked Sendable {}

/// A unit of demand held on an attempt by a reader (a task awaiting `get()`, a blocking
/// `wait`) or a shared run's caller, as its holder releases it.
@frozen
@usableFromInline
internal struct DemandUnit: @unchecked Sendable {
    // @unchecked: a node is itself `Sendable`; the field never changes.
    @usableFromInline
    internal let node: ChainNode

    /// Whether the deadline ledger counts its holder as a consumer with a deadline.
    @usableFromInline
    internal let bounded: Bool

    @inlinable
    internal init(_ node: ChainNode) {
        self.node = node
        bounded = false
    }

    /// Takes a unit of `node` for a reader that waits until `deadline` at the latest, counted so
    /// by the deadline ledger; `nil` if `node`'s demand has ended.
    @usableFromInline
    internal init?<Success, Failure>(
        readerOf node: AttemptNode<Success, Failure>, until deadline: ContinuousClock.Instant
    ) {
        guard node.takeUnitForStage() else {
            return nil
        }
        self.node = node
        bounded = DeadlineLedger.shared.readerArrives(on: node, until: DeadlineMark(deadline, on: ContinuousClock()))
        if !bounded {
            DeadlineLedger.shared.consumerArrived(on: node)
        }
    }

    /// Releases this unit, stopping what it leaves without demand (giving it back, as a
    /// reader that waited, if `givingBack`; see ``DemandState/givingBack()``); `reasonBits` says
    /// why its holder leaves (see ``ReleaseStack/stopReasonBits``).
    @inlinable
    internal func release(givingBack: Bool = false, reasonBits: UInt = 0) {
        if bounded {
            DeadlineLedger.shared.readerLeaves(node)
        }
        var nodes = ReleaseStack(stopReasonBits: reasonBits)
        nodes.pushUnit(node, givingBack: givingBack)
        nodes.releaseAll()
    }
}

/// The units one attempt holds on several others at once: a join's inputs, in its
/// ``AttemptNode/upstream``.
///
/// `@unchecked Sendable` is sound because `inputs` is set in `init` and changed only by
/// ``releaseUnit(givingBack:to:)`` and ``detachDownstream(to:)``, which run only once the list
/// was taken out of its slot, by its one owner.
@usableFromInline
internal final class HeldInputs: ChainNode, @unchecked Sendable {
    @exclusivity(unchecked)
    @usableFromInline
    internal var inputs: [ChainNode]

    @usableFromInline
    internal init(_ inputs: [ChainNode]) {
        self.inputs = inputs
    }

    deinit {
        releaseDownstream()
    }

    /// Releases the unit held on each input.
    @usableFromInline
    override internal func releaseUnit(givingBack: Bool, to nodes: inout ReleaseStack) {
        detachDownstream(to: &nodes)
    }

    @usableFromInline
    override internal func forEachCountedSource(_ body: (ChainNode) -> Void) {
        for input in inputs {
            body(input)
        }
    }

    @usableFromInline
    override internal var hasTrackedSource: Bool {
        inputs.contains { $0.hasTrackedSource }
    }

    @usableFromInline
    override internal func detachDownstream(to nodes: inout ReleaseStack) {
        nodes.reserve(inputs.count)
        // Moved out from the back of the reversed list, each reference goes as it is, retained
        // and released no more; the stack still releases the first input last.
        inputs.reverse()
        while let input = inputs.popLast() {
            nodes.pushUnit(input)
        }
    }
}
