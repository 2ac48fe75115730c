public import Synchronization

/// What a callback that may be dropped unrun captures instead of the node it moves on: a body a
/// node submits to an executor (a step, the work of `Attempt(upon:catching:)`, a delay's timer,
/// the bodies that move a retry loop on), or the `upon` callback given to a future written
/// outside the library.
///
/// Released without running, it reports that the node lost that decider, as a storage does for
/// a link it will never run (guarantee 17): a pending attempt that nothing else can decide is
/// orphaned. A node decided meanwhile (cancelled, say) only lets go of the step that will never
/// run, which nothing else touches once its body is gone. The node may stay pending after the
/// callback ran (a retry loop waits out its backoff, an `andThen` follows the attempt its step
/// started), so the callback says itself whether it ran: one relaxed store as it runs.
@usableFromInline
internal struct DroppableCallback<Node: ChainNode>: ~Copyable, Sendable {
    /// The node the callback moves on.
    @usableFromInline
    internal let node: Node

    /// Whether the callback ran.
    @usableFromInline
    internal let ran = Atomic<Bool>(false)

    @inlinable
    internal init(_ node: Node) {
        self.node = node
    }

    /// Runs `body`, the callback's work, with the node.
    @inlinable
    internal func run(_ body: (Node) -> Void) {
        ran.store(true, ordering: .relaxed)
        body(node)
    }

    deinit {
        // Relaxed: a callback released after it ran is released where it ran, or after the
        // executor's or the future's own synchronization with that thread.
        guard !ran.load(ordering: .relaxed) else {
            return
        }
        if node.hasDecided {
            node.dropUnrunStep()
        } else {
            var nodes = ReleaseStack()
            nodes.pushLost(node)
            nodes.releaseAll()
        }
    }
}
