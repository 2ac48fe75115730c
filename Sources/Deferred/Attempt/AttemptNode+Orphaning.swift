import Synchronization

/// Orphaning an attempt: finishing it without a result once none of its deciders can decide it
/// (guarantee 17).
///
/// An orphaned attempt is decided: its storage is published without a value (see
/// ``DeferredStorage/publishOrphaned(to:)``), so its handlers are released unrun, `peek()` stays
/// `nil`, a wait times out, and a later `cancel()` only sets `isCancelled`. Its demand is
/// settled as a finished attempt's is, so the producer's cancel handlers are released unrun and
/// what it held upstream is let go. Each stage that waited on it only through the dropped links
/// is told in the same loop and is orphaned in turn (or, where another decider remains, such as
/// a limit or another input of a join, stays pending), so a chain of any depth is released
/// without recursion.
extension AttemptNode: SubmittingNode {
    /// Orphans this attempt, or fails it as abandoned where its failure type can say so, and
    /// whatever thereby loses its last decider.
    @usableFromInline
    internal final func loseDeciders(to nodes: inout ReleaseStack) {
        defer { dropUnrunStep() }
        guard
            let error = abandonedError(
                AbandonedError(
                    writerType: "the source of \(Attempt<Success, Failure>.self)", file: "(unknown)", line: 0))
        else {
            orphan(to: &nodes)
            return
        }
        settleIfUnneeded()
        decide(.failure(error))
    }

    /// Orphans this attempt, and whatever thereby loses its last decider, unless it is decided.
    @usableFromInline
    internal final func orphan() {
        var nodes = ReleaseStack()
        orphan(to: &nodes)
        nodes.releaseAll()
    }

    /// Orphans this attempt unless it is decided, handing the nodes of its links to `nodes` as
    /// lost.
    ///
    /// Like ``decide(_:cancelled:in:)``, an attempt with a hub of its own settles it first; if
    /// the hub was cancelled for lack of demand before, the attempt is decided as cancelled
    /// instead where its failure type has a cancellation error, since its producer was told to
    /// stop.
    @usableFromInline
    internal final func orphan(to nodes: inout ReleaseStack) {
        guard claimFillAcquiring() else {
            return
        }
        guard ownsHub, let settled = hubSlot.withBorrowedObject({ $0.settle() }) ?? hubSlot.setTag().object?.settle()
        else {
            publishOrphaned(to: &nodes)
            releaseDemandOnceDecided(cancelled: false)
            dropPendingWork()
            return
        }
        if settled {
            publishOrphaned(to: &nodes)
            hubSlot.withBorrowedObject { $0.finishSettled() }
        } else if let error = cancellationError {
            flags.bitwiseOr(AttemptFlags.cancelled | AttemptFlags.decidedCancelled, ordering: .releasing)
            var queue = DrainQueue()
            publish(.failure(error), in: &queue)
            queue.drain()
        } else {
            publishOrphaned(to: &nodes)
        }
        dropPendingWork()
    }
}
