public import Synchronization

/// Orphaning: finishing a storage without a value once nothing can fill it any more.
///
/// An *orphaned* storage has *fill claimed* and *filled* set with its value slot empty. The
/// orphaner claims the fill like any fill (so exactly one of a fill, a cancellation and an
/// orphaning wins), leaves the slot empty and publishes with the fill's OR, taking the handlers
/// stored so far exactly as a fill does; it then drops them instead of running them. A
/// registrant that finds the storage published, or its slot's chunk closed, reads the slot
/// (which the publication's release made visible) and drops its handler too. So every handler
/// is run or dropped exactly once, the handover protocol unchanged; `peek()` stays `nil`; a
/// losing fill, which waits for the publication, returns; and a wait for the value sleeps until
/// its deadline.
///
/// A dropped link hands its node to a ``ReleaseStack`` as *lost*: that node has lost a decider
/// and decides for itself what that means (see ``ChainNode/lostDecider(to:)``), in the stack's
/// loop, so a chain of any depth is orphaned without recursion.
extension DeferredStorage {
    /// Whether this storage finished without a value.
    @inlinable
    internal final var isOrphaned: Bool {
        StorageState(rawValue: state.load(ordering: .acquiring)).isFilled && value.wrapped == nil
    }

    /// Publishes this storage as orphaned and drops the handlers stored so far, handing the
    /// nodes of links to `nodes` as lost.
    ///
    /// The caller won the fill with ``claimFill()`` (or ``claimFillAcquiring()``) and wrote no
    /// value.
    @usableFromInline
    internal final func publishOrphaned(to nodes: inout ReleaseStack) {
        let taken = StorageState(
            rawValue: state.bitwiseOr(StorageState.filledBit, ordering: .acquiringAndReleasing).oldValue)
        let owed = taken.publication
        if owed.runsFirst, let first = firstHandler.take() {
            first.drop(to: &nodes)
        }
        var bits = owed.overflowHead
        while bits != 0 {
            let chunk = RetainedBits.borrow(bits, as: HandlerChunk<Value>.self)
            chunk.closeAndDropReadyHandlers(to: &nodes)
            bits = chunk.next
        }
    }

    /// Runs `handler`, which the storage handed back because it is published: with the value,
    /// or, if the storage is orphaned, by dropping it.
    @inlinable
    internal final func runUnstored(_ handler: consuming Handler<Value>, in queue: inout DrainQueue) {
        if let value = value.wrapped {
            handler.run(with: value, from: self, in: &queue)
        } else {
            handler.dropLost()
        }
    }
}

extension Handler {
    /// Drops this handler unrun, handing a link's node to `nodes` as lost.
    @inlinable
    internal consuming func drop(to nodes: inout ReleaseStack) {
        if let node = linkedNode {
            nodes.pushLost(node)
        }
    }

    /// Drops this handler unrun, and orphans what its link's node thereby loses, at once.
    @usableFromInline
    internal consuming func dropLost() {
        var nodes = ReleaseStack()
        drop(to: &nodes)
        nodes.releaseAll()
    }
}
