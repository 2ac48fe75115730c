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
    func erasedSource<Erased>() -> FutureSource<Erased>

    /// The source of a view over this view's base with this view's steps, then `next`.
    ///
    /// - Precondition: `Input` is `Value`.
    func sourceAppending<Input, Next: Sendable>(_ next: LazyTransform<Input, Next>) -> FutureSource<Next>
}

extension LazyMapFuture: ErasableLazyView {
    @usableFromInline
    internal func erasedSource<Erased>() -> FutureSource<Erased> {
        if let future = base as? Future<Base.Value>, case .erased(let box) = future.source,
            let inner = box.base as? any ErasableLazyView
        {
            return inner.sourceAppending(transform) as! FutureSource<Erased>
        }
        return FutureSource<Value>.erased(AnyFutureBox(self)) as! FutureSource<Erased>
    }

    @usableFromInline
    internal func sourceAppending<Input, Next: Sendable>(_ next: LazyTransform<Input, Next>) -> FutureSource<Next> {
        let next = next as! LazyTransform<Value, Next>
        return .erased(AnyFutureBox(LazyMapFuture<Base, Next>(base: base, transform: transform.appending(next))))
    }
}

extension Attempt: FutureView {
    /// An attempt read as a future of its result: the link is added to its node like a
    /// handler of ``Attempt/upon(_:execute:)``, which it counts as.
    @usableFromInline
    internal func addLinkThroughView<Linked>(
        _ node: ChainNode,
        in queue: inout DrainQueue,
        _ step: @escaping @Sendable (ChainNode, Linked, inout DrainQueue) -> Void
    ) {
        self.node.pin()
        self.node.add(.link(node) { node, result, queue in step(node, result as! Linked, &queue) }, in: &queue)
    }
}
