public import Dispatch

/// A value that is not known yet and becomes known exactly once: both its promise and its
/// future.
///
/// The code that produces the value keeps the `Deferred` private and fills it; everyone else
/// gets a read-only ``Future``:
///
/// ```swift
/// final class ProfileService: Sendable {
///     func loadName(for id: Int) -> Future<String> {
///         let name = Deferred<String>()
///         DispatchQueue.global().async {
///             name.fill(with: "user \(id)")  // e.g. after a network reply
///         }
///         return Future(name)
///     }
/// }
///
/// ProfileService().loadName(for: 7).upon(.main) { name in
///     print("Hello, \(name)")
/// }
/// ```
///
/// `Deferred` is a small handle: copies share one value. Filling, reading and adding handlers
/// are lock-free and safe from any thread. An unfilled `Deferred` costs one allocation that
/// also holds its first handler; ``init(filledWith:)`` costs none.
public struct Deferred<Value: Sendable>: FutureProtocol, PromiseProtocol {
    @usableFromInline
    internal let backing: FutureBacking<Value>

    /// Creates an unfilled deferred.
    ///
    /// - Parameters:
    ///   - file: Where the deferred is made, for ``PendingFutures``; leave the default.
    ///   - line: The line where the deferred is made; leave the default.
    @inlinable
    public init(file: StaticString = #fileID, line: UInt = #line) {
        let storage = Storage<Value>()
        backing = .storage(storage)
        if PendingFutures.isRecording {
            storage.recordAsDeferred(file: file, line: line)
        }
    }

    /// Creates an unfilled deferred, for generic code over ``PromiseProtocol``.
    ///
    /// It is ``init(file:line:)`` without a place.
    @_disfavoredOverload
    @inlinable
    public init() {
        self.init(file: "(unknown)", line: 0)
    }

    /// Creates a deferred that is already filled with `value`.
    ///
    /// - Parameter value: The value every reader sees; any later `fill` returns `false`.
    @inlinable
    public init(filledWith value: Value) {
        backing = .filled(value)
    }

    /// Calls `body` with the value, on `executor`, once this deferred is filled.
    ///
    /// If the value is already there, `body` is submitted to `executor` at once (on
    /// ``ImmediateExecutor`` it runs before `upon` returns). Handlers added from one thread
    /// before the fill start in the order they were added when `executor` is serial.
    ///
    /// - Parameters:
    ///   - executor: Where `body` runs. See ``Executor``.
    ///   - body: Called exactly once with the value, then released.
    @inlinable
    public func upon(_ executor: some Executor, execute body: @escaping @Sendable (Value) -> Void) {
        Future(self).upon(executor, execute: body)
    }

    /// Returns the value if this deferred is filled, or `nil` at once if it is not.
    @inlinable
    public func peek() -> Value? {
        Future(self).peek()
    }

    /// Blocks the calling thread until this deferred is filled or `time` passes.
    ///
    /// Returns at once, without allocating, when the value is there; returns `nil` at once
    /// when `time` has passed. Never wait on the executor whose work fills this deferred.
    ///
    /// - Parameter time: The latest time to wait until; `.distantFuture` waits indefinitely.
    /// - Returns: The value, or `nil` if `time` passed first.
    @available(
        *, noasync, message: "wait(until:) blocks the thread; use 'await future.value' or 'try await future.get()'"
    )
    @inlinable
    public func wait(until time: DispatchTime) -> Value? {
        Future(self).wait(until: time)
    }

    /// Whether this deferred has been filled.
    @inlinable
    public var isFilled: Bool {
        Future(self).isFilled
    }

    /// Fills this deferred with `value` unless it is filled already, then runs every pending
    /// handler.
    ///
    /// Of any number of racing calls exactly one returns `true`, and every reader sees its
    /// value. When this returns, with either result, ``peek()`` returns the winning value.
    ///
    /// - Parameter value: The value to deliver to every reader.
    /// - Returns: `true` if this call filled the deferred, `false` if it was already filled.
    @inlinable
    @discardableResult
    public func fill(with value: Value) -> Bool {
        backing.fill(value)
    }
}

/// What a ``Future`` or ``Deferred`` reads from.
@usableFromInline
internal enum FutureBacking<Value: Sendable>: Sendable {
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
            DrainQueue.draining { addLink(node, in: &$0, step) }
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

extension FutureBacking {
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
            future.backing.waiters
        } else if let deferred = self as? Deferred<Value> {
            deferred.backing.waiters
        } else {
            nil
        }
    }
}
