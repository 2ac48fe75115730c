import Synchronization

/// Orphaning an attempt: finishing it without a result once none of its deciders can decide it
/// (guarantee 17).
///
/// An orphaned attempt is decided: its storage is published without a value (see
/// ``DeferredStorage/publishOrphaned(to:)``), so its handlers are released unrun, `peek()` stays
/// `nil`, a wait times out, and a later `cancel()` only sets `isCancelled`. Its demand settles
/// as a finished attempt's does, so the producer's cancel handlers are released unrun and what
/// it held upstream is let go. Each stage that waited on it only through the dropped links
/// is told in the same loop and is orphaned in turn (or, where another decider remains, such as
/// a limit or another input of a join, stays pending), so a chain of any depth is released
/// without recursion.
extension AttemptNode {
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
    /// Like ``decide(_:cancelled:in:)``: for a failure type without a cancellation error that
    /// stopped first, its stopper ends the demand.
    @usableFromInline
    internal final func orphan(to nodes: inout ReleaseStack) {
        guard claimFillAcquiring() else {
            return
        }
        if cancellation.hasNoCancellationError() && !updateDemand({ $0.settling(cancelled: false) }) {
            publishOrphaned(to: &nodes)
        } else {
            publishOrphaned(to: &nodes)
            endDemand(.settle, to: &nodes)
        }
        dropPendingWork()
    }
}
