public import Synchronization

/// How an attempt's node takes part in demand (see ``DemandState``): giving units to its
/// dependents, the path below it, and the units it holds itself.
extension AttemptNode {
    /// The hub where dependents hold demand on this attempt, made now for a root without one.
    @inlinable
    internal final func consumerHub() -> AttemptHub {
        if let hub = hubSlot.load().object {
            return hub
        }
        return makeHub()
    }

    @usableFromInline
    internal final func makeHub() -> AttemptHub {
        let made = AttemptHub(pinned: false)
        let (stored, finished) = hubSlot.storeIfEmpty(made)
        guard stored else {
            return hubSlot.load().object.unsafelyUnwrapped
        }
        // A handler may have pinned this attempt while the hub did not exist.
        if AttemptFlags(rawValue: flags.load(ordering: .sequentiallyConsistent)).has(AttemptFlags.pinnedEarly) {
            made.pin()
        }
        if finished {
            // A cancel() after the attempt finished withdraws callbacks; it does not make the
            // result a cancellation, so the producer's cancel handlers must not run.
            made.finish(
                cancelled: AttemptFlags(rawValue: flags.load(ordering: .acquiring)).has(AttemptFlags.decidedCancelled))
        }
        return made
    }

    /// This attempt's depth on its hub's path: 0 if the hub is its own.
    @inlinable
    internal final var depth: Int {
        AttemptFlags(rawValue: flags.load(ordering: .relaxed)).depth
    }

    /// Gives a dependent a unit of demand on `hub`, this attempt's ``consumerHub()``: returns
    /// the unit's depth (see ``DemandUnit``), or `nil` if this attempt was cancelled for lack of
    /// demand; and whether the dependent continues this attempt's path.
    ///
    /// A dependent `continuingPath` (a transparent stage, or an owner waiting on a transparent
    /// stage) takes the path unit if nobody took the path below this attempt yet: the unit this
    /// attempt holds, handed over, or a new one. So a chain of transforms holds one unit, at its
    /// end. Others, and a second dependent, take a unit at this attempt's depth.
    @inlinable
    @inline(__always)
    internal final func takeUnit(on hub: AttemptHub, continuingPath: Bool) -> (depth: Int?, continuesPath: Bool) {
        if continuingPath && isDecided {
            // An owner of an attempt that has its result needs nothing upstream.
            return (nil, false)
        }
        if continuingPath {
            switch takePath(countingSidesOn: hub) {
            case .handedOver:
                return (DemandUnit.path, true)
            case .converting:
                // This attempt keeps its unit for its handlers, counted as a side unit: from now
                // on it needs only the stages down to this one.
                return (hub.takePathFromConvertedUnit() ? DemandUnit.path : nil, true)
            case .fresh:
                return (hub.addUnit(depth: DemandUnit.path) ? DemandUnit.path : nil, true)
            case .alreadyTaken:
                break
            }
        }
        let depth = depth
        return (hub.addUnit(depth: depth) ? depth : nil, false)
    }

    /// A unit of demand on this attempt for an owner that waits on it (continuing the path of a
    /// transparent attempt) or for a reader; `nil` if this attempt was cancelled for lack of
    /// demand.
    @inlinable
    internal final func takeUnit(forOwner: Bool) -> DemandUnit? {
        let hub = consumerHub()
        return takeUnit(on: hub, continuingPath: forOwner && !ownsHub).depth.map { DemandUnit(hub, depth: $0) }
    }

    /// The demand of a transparent attempt derived from this one when another continues this
    /// attempt's path already: a hub of its own, holding a unit at `depth` on `hub` (none if
    /// `nil`).
    @usableFromInline
    internal final func branch(holding depth: Int?, on hub: AttemptHub) -> DerivedDemand {
        let own = depth.map { AttemptHub(holding: DemandUnit(hub, depth: $0)) } ?? AttemptHub(pinned: false)
        return DerivedDemand(hub: own, flags: AttemptFlags.ownsHub)
    }

    /// Marks the path below this attempt taken, handing over the unit it holds if it does not
    /// keep it; returns what the dependent that takes the path must do.
    ///
    /// A unit this attempt keeps becomes a side unit at its depth on `hub`, counted before the
    /// conversion is published: this attempt releases it as a side unit once it sees the
    /// conversion, so the count never goes below zero (see ``SideDemand``).
    @inlinable
    @inline(__always)
    internal final func takePath(countingSidesOn hub: AttemptHub) -> PathTaking {
        var observed = flags.load(ordering: .relaxed)
        while true {
            guard let (next, taking) = AttemptFlags(rawValue: observed).takingPath() else {
                return .alreadyTaken
            }
            if case .converting(let depth) = taking {
                hub.adjustSide(depth, by: 1)
            }
            let (exchanged, current) = flags.compareExchange(
                expected: observed, desired: next.rawValue, ordering: .acquiringAndReleasing)
            if exchanged {
                return taking
            }
            if case .converting(let depth) = taking {
                hub.adjustSide(depth, by: -1)
            }
            observed = current
        }
    }

    /// Records a handler that needs this attempt for good: only cancelling this attempt, or its
    /// source, stops it.
    ///
    /// An attempt with a hub of its own pins the hub. A transparent node shares its source's
    /// hub, which the handler must not pin (cancelling this attempt must still stop the
    /// source), so it keeps a unit of its own there instead, released when it is decided.
    @inlinable
    internal final func pin() {
        guard ownsHub else {
            let before = AttemptFlags(
                rawValue: flags.bitwiseOr(AttemptFlags.keepsUnit, ordering: .acquiringAndReleasing).oldValue)
            if before.pinning().takesSideUnit, let hub = hubSlot.load().object, hub.addUnit(depth: before.depth) {
                flags.bitwiseOr(AttemptFlags.holdsUnit, ordering: .acquiringAndReleasing)
                // Read with an update, not a load: either this update comes after the decision's
                // claim and sees it, or the claim, which acquires, comes after it and the decision
                // sees the unit (see `releaseDemandOnceDecided`).
                let state = StorageState(rawValue: state.bitwiseOr(0, ordering: .acquiringAndReleasing).oldValue)
                if state.isFillClaimed {
                    // Decided meanwhile, and possibly released already: release this unit too.
                    releaseDemand(cancelled: false)
                }
            }
            return
        }
        if let hub = hubSlot.load().object {
            hub.pin()
            return
        }
        flags.bitwiseOr(AttemptFlags.pinnedEarly, ordering: .sequentiallyConsistent)
        if let hub = hubSlot.load().object {
            hub.pin()
        }
    }

    /// ``releaseDemand(cancelled:)`` for the caller that has just claimed this attempt's fill
    /// with ``DeferredStorage/claimFillAcquiring()``: a stage that holds no unit (a `map` in the
    /// middle of a chain) finds so with a load instead of an update.
    ///
    /// A handler's ``pin()`` is the only thing that gives a stage a unit after it is made. It
    /// marks the unit held, then reads the state word with an update: if that update comes
    /// before the claim in the word's order, the claim acquires the mark and the load here sees
    /// it; if after, the pin sees the claim and releases the unit itself. The update that
    /// releases is exactly-once either way.
    @inlinable
    internal final func releaseDemandOnceDecided(cancelled: Bool) {
        if !ownsHub && !AttemptFlags(rawValue: flags.load(ordering: .relaxed)).has(AttemptFlags.holdsUnit) {
            return
        }
        releaseDemand(cancelled: cancelled)
    }

    /// Releases the demand this attempt holds upstream, cancelling what nobody needs any more.
    @usableFromInline
    internal final func releaseDemand(cancelled: Bool) {
        if ownsHub {
            hubSlot.setTag().object?.finish(cancelled: cancelled)
        } else {
            // Acquiring: a conversion's side count, made before the conversion was published, is
            // seen before this releases it.
            let before = AttemptFlags(
                rawValue: flags.bitwiseAnd(~AttemptFlags.holdsUnit, ordering: .acquiringAndReleasing).oldValue)
            if let depth = before.releasingHeldUnit().released, let hub = hubSlot.load().object {
                DemandUnit(hub, depth: depth).release()
            }
        }
    }
}
