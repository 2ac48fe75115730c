/// Code waiting for a storage's value.
@usableFromInline
internal enum Handler<Value: Sendable> {
    /// A callback added with `upon(.immediate)`: runs in place, in the drain loop. (The
    /// executor is kept only so that every case starts with an object reference, which lets
    /// the enum keep its tag in spare bits and stay 32 bytes.)
    case immediate(ImmediateExecutor, @Sendable (Value) -> Void)

    /// A callback added with `upon` on any other executor: submitted to it.
    case callback(any Executor, @Sendable (Value) -> Void)

    /// A step of one of the library's combinators. `node` is what the step continues (the
    /// storage it fills, or a join), kept here so that releasing an unfilled chain can walk
    /// it without recursion. `step` receives the node, the value and the running drain queue,
    /// so whatever it completes runs in the caller's drain loop rather than a nested call.
    case link(ChainNode, @Sendable (ChainNode, Value, inout DrainQueue) -> Void)

    /// A step of an attempt combinator: like ``link``, and the step also receives the storage
    /// that runs it (the source attempt), to read how that attempt finished.
    case sourcedLink(ChainNode, @Sendable (_ source: ChainNode, _ node: ChainNode, Value, inout DrainQueue) -> Void)

    /// A callback of an attempt (`uponSuccess`, `uponFailure`): like ``callback``, and `body`
    /// also receives the storage that runs it, to read whether the attempt was cancelled when
    /// the body starts. Receiving it rather than capturing it keeps a pending attempt from
    /// holding itself through its own handler.
    case sourcedCallback(any Executor, @Sendable (_ source: ChainNode, Value) -> Void)

    /// A callback that runs `body` on `executor`.
    @inlinable
    internal init<E: Executor>(_ executor: E, _ body: @escaping @Sendable (Value) -> Void) {
        if E.self == ImmediateExecutor.self {
            self = .immediate(ImmediateExecutor.shared, body)
        } else {
            self = .callback(executor, body)
        }
    }

    /// Runs this handler with the value that `source` was filled with.
    ///
    /// Consumes the handler, so that its node and step move into the call instead of being
    /// retained for it and released after.
    @inlinable
    internal consuming func run(with value: Value, from source: ChainNode, in queue: inout DrainQueue) {
        switch consume self {
        case .immediate(_, let body):
            body(value)
        case .callback(let executor, let body):
            executor.submit { body(value) }
        case .link(let node, let step):
            step(node, value, &queue)
        case .sourcedLink(let node, let step):
            step(source, node, value, &queue)
        case .sourcedCallback(let executor, let body):
            if executor.runsInPlace {
                body(source, value)
            } else {
                executor.submit { body(source, value) }
            }
        }
    }

    /// The chain node this handler continues, if it is a link.
    @inlinable
    internal var linkedNode: ChainNode? {
        switch self {
        case .link(let node, _), .sourcedLink(let node, _): node
        case .immediate, .callback, .sourcedCallback: nil
        }
    }
}

/// A handler added after the inline slot was taken: one node of a stack that the storage's
/// state word points to, newest first.
///
/// Nodes are linked by address bits and retained manually, so releasing a long stack is a
/// loop, never a recursion. Only whoever owns the stack (the registrant before its push, the
/// filler after taking it, or the last owner of the storage) touches a node.
@usableFromInline
internal final class HandlerNode<Value: Sendable>: StackNode {
    @usableFromInline
    internal let handler: Handler<Value>

    /// The address bits of the next older node, which this node retains, or zero.
    ///
    /// Only the node's one owner of the moment touches it (the registrant before its push, then
    /// whoever took the chain), so the dynamic exclusivity check, which cost three calls into
    /// the runtime per handler, is left out.
    @exclusivity(unchecked)
    @usableFromInline
    package var next: UInt

    @inlinable
    internal init(_ handler: Handler<Value>) {
        self.handler = handler
        self.next = 0
    }
}
