/// The link layer's entry point: how every combinator attaches a node to the future it reads.
///
/// A *link* is a handler that holds the node it continues (a ``ChainNode``) and a step that
/// receives the node, the value and the running ``DrainQueue``. Because the handler names its
/// node, releasing an unfilled chain walks it with a loop (``ReleaseStack``), and because the
/// step fills the node through the running queue, filling a chain of any length runs in
/// constant stack space. Combinators call ``FutureProtocol/link(_:_:)`` and nothing else; only
/// nodes (the types in this folder and the attempt nodes) see a drain queue.
///
/// This type is the step every link shares: it receives the node it continues, the value and
/// the running queue.
@usableFromInline
internal typealias LinkStep<Value> = @Sendable (ChainNode, Value, inout DrainQueue) -> Void

extension FutureProtocol {
    /// Links `node` to this future: `step` runs once with `node` and the value, once the value
    /// is known, then whatever that completes runs before this call returns if the value is
    /// known already.
    ///
    /// This is the one place a combinator starts a drain: it owns the trampoline.
    @inlinable
    internal func link(_ node: ChainNode, _ step: @escaping LinkStep<Value>) {
        if let future = self as? Future<Value> {
            future.source.link(node, step)
        } else if let deferred = self as? Deferred<Value> {
            deferred.source.link(node, step)
        } else {
            var queue = DrainQueue()
            addLink(node, in: &queue, step)
            queue.drain()
        }
    }

    /// Adds a link step through the caller's running queue, taking the lock-free path when
    /// this future is backed by the library's storage or is a view of such a future, the value
    /// in place when another kind of future has one, and an `upon` callback otherwise.
    ///
    /// For nodes, which already run under a queue; combinators call ``link(_:_:)``.
    @inlinable
    internal func addLink(
        _ node: ChainNode,
        in queue: inout DrainQueue,
        _ step: @escaping LinkStep<Value>
    ) {
        if let future = self as? Future<Value> {
            future.source.addLink(node, in: &queue, step)
        } else if let deferred = self as? Deferred<Value> {
            deferred.source.addLink(node, in: &queue, step)
        } else if let view = self as? any FutureView {
            view.addLinkThroughView(node, in: &queue, step)
        } else if let value = peek() {
            // A future of another kind that has its value already: take it in place, through
            // the running queue, so that a chain through such futures does not nest.
            step(node, value, &queue)
        } else {
            // Filled later, by code outside the library: the step starts a drain of its own. A
            // future that drops the callback unrun loses the node's decider.
            let guarded = DroppableCallback(node)
            upon(ImmediateExecutor.shared) { value in
                guarded.run { node in
                    var queue = DrainQueue()
                    step(node, value, &queue)
                    queue.drain()
                }
            }
        }
    }
}
