public import Dispatch

/// What a ``Future`` or ``Deferred`` reads from.
@usableFromInline
internal enum FutureSource<Value: Sendable>: Sendable {
    /// A lock-free storage that is filled at most once.
    case storage(Storage<Value>)
    /// A value known from the start; costs no allocation.
    case filled(Value)
    /// Nothing, ever.
    case never
    /// Another kind of future, type-erased.
    case erased(AnyFutureBox<Value>)

    @inlinable
    internal func upon<E: Executor>(_ executor: E, execute body: @escaping @Sendable (Value) -> Void) {
        switch self {
        case .storage(let storage):
            storage.upon(executor, execute: body)
        case .filled(let value):
            executor.run(body, with: value)
        case .never:
            break  // The body can never run; dropping it releases its captures now.
        case .erased(let box):
            box.base.upon(executor, execute: body)
        }
    }

    /// Fills the storage, if this source is one that is not filled yet.
    ///
    /// A method of the source rather than a `guard case` in `Deferred.fill`: matching here, on a
    /// borrowed `self`, binds the storage without the retain and release that copying it out of
    /// the enum costs (two of S1's atomic read-modify-writes).
    @inlinable
    internal func fill(_ value: Value) -> Bool {
        switch self {
        case .storage(let storage): storage.fill(value)
        case .filled, .never, .erased: false
        }
    }

    @inlinable
    internal func peek() -> Value? {
        switch self {
        case .storage(let storage): storage.peek()
        case .filled(let value): value
        case .never: nil
        case .erased(let box): box.base.peek()
        }
    }

    @inlinable
    internal var isFilled: Bool {
        switch self {
        case .storage(let storage): storage.isFilled
        case .filled: true
        case .never: false
        case .erased(let box): box.base.isFilled
        }
    }

    @inlinable
    internal func wait(until time: DispatchTime) -> Value? {
        switch self {
        case .storage(let storage): storage.wait(until: time)
        case .filled(let value): value
        case .never: sleepWithoutValue(until: time)
        case .erased(let box): box.base.wait(until: time)
        }
    }

    /// Links `node` in a drain of its own; see ``FutureProtocol/link(_:_:)``.
    ///
    /// A storage that is not filled yet stores the link without any drain queue: making and
    /// destroying an empty one cost some 50 instructions a stage of a chain being built.
    @inlinable
    internal func link(_ node: ChainNode, _ step: @escaping @Sendable (ChainNode, Value, inout DrainQueue) -> Void) {
        if case .storage(let storage) = self {
            storage.add(.link(node, step))
        } else {
            var queue = DrainQueue()
            addLink(node, in: &queue, step)
            queue.drain()
        }
    }

    @inlinable
    internal func addLink(
        _ node: ChainNode,
        in queue: inout DrainQueue,
        _ step: @escaping @Sendable (ChainNode, Value, inout DrainQueue) -> Void
    ) {
        switch self {
        case .storage(let storage):
            storage.add(.link(node, step), in: &queue)
        case .filled(let value):
            step(node, value, &queue)
        case .never:
            break
        case .erased(let box):
            box.base.addLink(node, in: &queue, step)
        }
    }
}

extension FutureSource {
    /// Where a cancellable waiter for this source registers: the storage's waiter registry,
    /// or `nil` when the source has none (it is filled, never filled, or another kind).
    @usableFromInline
    internal var waiters: WaiterRegistry<Value>? {
        switch self {
        case .storage(let storage): storage.waiters()
        case .filled, .never: nil
        case .erased(let box): box.base.waiters
        }
    }
}

/// A type-erased future of any other kind.
@usableFromInline
internal final class AnyFutureBox<Value: Sendable>: Sendable {
    @usableFromInline
    internal let base: any FutureProtocol<Value>

    @inlinable
    internal init(_ base: any FutureProtocol<Value>) {
        self.base = base
    }
}

extension FutureProtocol {
    /// The waiter registry of this future's storage, if it is backed by the library's storage
    /// and not filled yet.
    @usableFromInline
    internal var waiters: WaiterRegistry<Value>? {
        if let future = self as? Future<Value> {
            future.source.waiters
        } else if let deferred = self as? Deferred<Value> {
            deferred.source.waiters
        } else {
            nil
        }
    }
}
