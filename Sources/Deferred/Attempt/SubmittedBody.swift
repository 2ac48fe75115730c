/// An attempt node that submits a body to an executor to be decided (a step, the work of
/// `Attempt(upon:catching:)`, a delay's timer), and can tell whether that body never ran.
@usableFromInline
internal protocol SubmittingNode: AnyObject, Sendable {
    /// Whether the body submitted for this node was released without running and left the node
    /// waiting for it; called once, when the body is released.
    var isWaitingForDroppedBody: Bool { get }

    /// See ``AttemptNode/loseDeciders(to:)``.
    func loseDeciders(to nodes: inout ReleaseStack)
}

/// What a body submitted for an attempt captures instead of its node: released with the body,
/// it orphans the attempt if the body never ran (guarantee 17).
///
/// An executor that stops drops what it still holds (a shut-down `ThreadExecutor`, an
/// invalidated token); the attempt whose body it drops has lost its decider. The guard is the
/// node reference the body needed anyway, so it costs no allocation; once the body has run, its
/// release finds the node decided (or following what its step started) and does nothing.
@usableFromInline
internal struct SubmittedBody<Node: SubmittingNode>: ~Copyable, Sendable {
    /// The node the body decides.
    @usableFromInline
    internal let node: Node

    @inlinable
    internal init(_ node: Node) {
        self.node = node
    }

    deinit {
        if node.isWaitingForDroppedBody {
            var nodes = ReleaseStack()
            node.loseDeciders(to: &nodes)
            nodes.releaseAll()
        }
    }
}
