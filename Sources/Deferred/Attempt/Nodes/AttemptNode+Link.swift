extension AttemptNode {
    // MARK: The link layer's entry points for attempts

    /// Decides this attempt with what `step` returns, in a drain of its own, if a step of this
    /// attempt may still start (see ``mayStartStep(in:)``); otherwise `step` never runs.
    ///
    /// What an executor runs for an attempt's step (`Attempt.async`, a delay's timer) calls this.
    @inlinable
    internal final func runStep(_ step: () -> Result<Success, Failure>) {
        var queue = DrainQueue()
        if mayStartStep(in: &queue) {
            decide(step(), cancelled: false, in: &queue)
        }
        queue.drain()
    }

    /// The link step that decides the attempt `node` with a future's value as its success.
    @inlinable
    internal static func succeedLinked(_ node: ChainNode, _ value: Success, _ queue: inout DrainQueue) {
        AttemptNode.linked(node).decide(.success(value), cancelled: false, in: &queue)
    }

    /// The link step that decides the attempt `node` with a future's result.
    @inlinable
    internal static func decideLinked(_ node: ChainNode, _ result: Result<Success, Failure>, _ queue: inout DrainQueue)
    {
        AttemptNode.linked(node).decide(result, cancelled: false, in: &queue)
    }

    /// Adds `handler` through `queue`, with this attempt as the source its step sees.
    @inlinable
    internal final func link(
        _ node: ChainNode,
        in queue: inout DrainQueue,
        _ step: @escaping @Sendable (ChainNode, ChainNode, Result<Success, Failure>, inout DrainQueue) -> Void
    ) {
        add(.sourcedLink(node, step), in: &queue)
    }

    /// The source attempt of a step: the storage that runs a ``Handler/sourcedLink(_:_:)``
    /// added by ``link(_:in:_:)``, which is always an attempt node of this type.
    @inlinable
    internal static func source(_ node: ChainNode) -> AttemptNode {
        AttemptNode.linked(node)
    }
}
