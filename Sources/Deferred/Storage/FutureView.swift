/// A future that is a view of another future rather than a storage of its own:
/// ``LazyMapFuture`` and ``IgnoringFuture``.
///
/// A combinator over a view links straight to the storage underneath, through the caller's
/// drain queue. Linked through `upon` instead, each view in a chain would start a drain of its
/// own inside the one before, and a long enough chain would overflow the stack.
@usableFromInline
internal protocol FutureView<Value>: FutureProtocol {
    /// Adds a combinator's link step to the future underneath, adapting its value.
    func addLinkThroughView(
        _ node: ChainNode,
        in queue: inout DrainQueue,
        _ step: @escaping @Sendable (ChainNode, Value, inout DrainQueue) -> Void
    )
}

extension LazyMapFuture: FutureView {
    @usableFromInline
    internal func addLinkThroughView(
        _ node: ChainNode,
        in queue: inout DrainQueue,
        _ step: @escaping @Sendable (ChainNode, Value, inout DrainQueue) -> Void
    ) {
        base.addLink(node, in: &queue) { [transform] node, value, queue in
            step(node, transform(value), &queue)
        }
    }
}

extension IgnoringFuture: FutureView {
    @usableFromInline
    internal func addLinkThroughView(
        _ node: ChainNode,
        in queue: inout DrainQueue,
        _ step: @escaping @Sendable (ChainNode, Void, inout DrainQueue) -> Void
    ) {
        base.addLink(node, in: &queue) { node, _, queue in step(node, (), &queue) }
    }
}

/// A lazy map that can be erased to a ``Future`` without nesting: erasing a lazy map over an
/// erased lazy map makes one view over the first one's base, with the steps of both.
///
/// Without this, a chain that alternates `every` and `eraseToFuture()` would nest one box in
/// the next, and every read, link and release would recurse through all of them.
@usableFromInline
internal protocol ErasableLazyView<Value>: FutureProtocol {
    /// This view as the source of a ``Future``.
    func erasedSource() -> FutureSource<Value>

    /// The source of a view over this view's base with this view's steps, then `next`.
    func sourceAppending<Next: Sendable>(_ next: LazyTransform<Value, Next>) -> FutureSource<Next>
}

extension LazyMapFuture: ErasableLazyView {
    @usableFromInline
    internal func erasedSource() -> FutureSource<Value> {
        if let future = base as? Future<Base.Value>, case .erased(let box) = future.source,
            let inner = box.base as? any ErasableLazyView<Base.Value>
        {
            return inner.sourceAppending(transform)
        }
        return .erased(AnyFutureBox(self))
    }

    @usableFromInline
    internal func sourceAppending<Next: Sendable>(_ next: LazyTransform<Value, Next>) -> FutureSource<Next> {
        .erased(AnyFutureBox(LazyMapFuture<Base, Next>(base: base, transform: transform.appending(next))))
    }
}
