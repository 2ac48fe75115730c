/// Code waiting for a storage's value.
@usableFromInline
internal enum Handler<Value: Sendable> {
    /// A callback added with `upon(.immediate)`: runs in place, in the drain loop. (The
    /// reference to the shared immediate executor is there only so that every case starts with
    /// an object reference, which lets the enum keep its tag in spare bits and stay 32 bytes; it
    /// is not retained, so adding such a handler costs no reference counting.)
    case immediate(UnretainedImmediateExecutor, @Sendable (Value) -> Void)

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

    /// A producer's cancel handler, in an attempt's ``CancelHandlers`` (a storage of `Bool`, filled with `true`
    /// when the attempt is cancelled): runs `body` in place if the value is `true`, and drops it
    /// otherwise. A case of its own, rather than an immediate callback that tests the value, so
    /// that adding one wraps `body` in no closure of its own. (The executor reference is there
    /// for the same reason as in ``immediate(_:_:)``.)
    case cancelHandler(UnretainedImmediateExecutor, @Sendable () -> Void)

    /// A callback that runs `body` on `executor`.
    @inlinable
    internal init<E: Executor>(_ executor: E, _ body: @escaping @Sendable (Value) -> Void) {
        if E.self == ImmediateExecutor.self {
            self = .immediate(UnretainedImmediateExecutor(), body)
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
            queue.runStep(of: node) { node, queue in step(node, value, &queue) }
        case .sourcedLink(let node, let step):
            queue.runStep(of: node) { node, queue in step(source, node, value, &queue) }
        case .sourcedCallback(let executor, let body):
            if executor.runsInPlace {
                body(source, value)
            } else {
                executor.submit { body(source, value) }
            }
        case .cancelHandler(_, let body):
            if value as? Bool == true {
                body()
            }
        }
    }

    /// The chain node this handler continues, if it is a link.
    @inlinable
    internal var linkedNode: ChainNode? {
        switch self {
        case .link(let node, _), .sourcedLink(let node, _): node
        case .immediate, .callback, .sourcedCallback, .cancelHandler: nil
        }
    }
}

/// A reference to ``ImmediateExecutor/shared`` that is not counted.
///
/// `unowned(unsafe)` is sound because the shared executor is a global constant that lives for
/// the whole process.
@frozen
@usableFromInline
internal struct UnretainedImmediateExecutor: Sendable {
    @usableFromInline
    internal unowned(unsafe) let executor: ImmediateExecutor

    @inlinable
    internal init() {
        executor = ImmediateExecutor.shared
    }
}
