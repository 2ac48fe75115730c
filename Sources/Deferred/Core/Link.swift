public import Synchronization

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
            future.backing.link(node, step)
        } else if let deferred = self as? Deferred<Value> {
            deferred.backing.link(node, step)
        } else {
            DrainQueue.draining { addLink(node, in: &$0, step) }
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
            future.backing.addLink(node, in: &queue, step)
        } else if let deferred = self as? Deferred<Value> {
            deferred.backing.addLink(node, in: &queue, step)
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

/// A future that is a view of another future rather than a storage of its own:
/// ``LazyMapFuture`` and ``IgnoringFuture``.
///
/// A combinator over a view links straight to the storage underneath, through the caller's
/// drain queue. Linked through `upon` instead, each view in a chain would start a drain of its
/// own inside the one before, and a long enough chain would overflow the stack.
///
/// The protocol names no primary associated type on purpose: a future is recognized as a view
/// with a plain conformance check, which the runtime caches, where a cast to
/// `any FutureView<Value>` would check the same-type requirement afresh each time (a debug
/// build spent a quarter of a view chain's time there).
@usableFromInline
internal protocol FutureView: FutureProtocol {
    /// Adds a combinator's link step to the future underneath, adapting its value.
    ///
    /// - Precondition: `Linked` is `Value`; the step receives each value through a checked
    ///   cast that folds away once the caller is specialized.
    func addLinkThroughView<Linked>(
        _ node: ChainNode,
        in queue: inout DrainQueue,
        _ step: @escaping @Sendable (ChainNode, Linked, inout DrainQueue) -> Void
    )
}

extension LazyMapFuture: FutureView {
    @usableFromInline
    internal func addLinkThroughView<Linked>(
        _ node: ChainNode,
        in queue: inout DrainQueue,
        _ step: @escaping @Sendable (ChainNode, Linked, inout DrainQueue) -> Void
    ) {
        base.addLink(node, in: &queue) { [transform] node, value, queue in
            step(node, transform(value) as! Linked, &queue)
        }
    }
}

extension IgnoringFuture: FutureView {
    @usableFromInline
    internal func addLinkThroughView<Linked>(
        _ node: ChainNode,
        in queue: inout DrainQueue,
        _ step: @escaping @Sendable (ChainNode, Linked, inout DrainQueue) -> Void
    ) {
        base.addLink(node, in: &queue) { node, _, queue in step(node, () as! Linked, &queue) }
    }
}

/// A lazy map that can be erased to a ``Future`` without nesting: erasing a lazy map over an
/// erased lazy map makes one view over the first one's base, with the steps of both.
///
/// Without this, a chain that alternates `lazy.map` and `eraseToFuture()` would nest one box in
/// the next, and every read, link and release would recurse through all of them.
///
/// Like ``FutureView``, the protocol names no primary associated type, so that recognizing a
/// lazy view is a cached conformance check; the generic requirements below take the view's
/// value type as a parameter and check it.
@usableFromInline
internal protocol ErasableLazyView: FutureProtocol {
    /// This view as the source of a ``Future``.
    ///
    /// - Precondition: `Erased` is `Value`.
    func erasedBacking<Erased>() -> FutureBacking<Erased>

    /// The source of a view over this view's base with this view's steps, then `next`.
    ///
    /// - Precondition: `Input` is `Value`.
    func backingAppending<Input, Next: Sendable>(_ next: LazyTransform<Input, Next>) -> FutureBacking<Next>
}

extension LazyMapFuture: ErasableLazyView {
    @usableFromInline
    internal func erasedBacking<Erased>() -> FutureBacking<Erased> {
        if let future = base as? Future<Base.Value>, case .erased(let box) = future.backing,
            let inner = box.base as? any ErasableLazyView
        {
            return inner.backingAppending(transform) as! FutureBacking<Erased>
        }
        return FutureBacking<Value>.erased(AnyFutureBox(self)) as! FutureBacking<Erased>
    }

    @usableFromInline
    internal func backingAppending<Input, Next: Sendable>(_ next: LazyTransform<Input, Next>) -> FutureBacking<Next> {
        let next = next as! LazyTransform<Value, Next>
        return .erased(AnyFutureBox(LazyMapFuture<Base, Next>(base: base, transform: transform.appending(next))))
    }
}
