extension FutureProtocol {
    /// Returns a future filled with `transform` applied to this future's value.
    ///
    /// The transform runs once, on `executor`, as soon as this future is filled, and its
    /// result is stored; the closure is released right after it runs. Chains of any length
    /// on ``ImmediateExecutor`` fill without growing the stack.
    ///
    /// ```swift
    /// let size: Future<Int> = download.map(upon: .global()) { data in data.count }
    /// ```
    ///
    /// - Parameters:
    ///   - executor: Where `transform` runs. See ``Executor``.
    ///   - transform: Computes the new value from this future's value.
    /// - Returns: A read-only future of the transformed value.
    @inlinable
    public func map<NewValue: Sendable>(
        upon executor: some Executor,
        transform: @escaping @Sendable (Value) -> NewValue
    ) -> Future<NewValue> {
        if executor.runsInPlace, let value = peek() {
            return Future(filledWith: transform(value))
        }
        let mapped = MapStorage(executor: executor.runsInPlace ? nil : executor, transform: transform)
        link(mapped, MapStorage<Value, NewValue>.receive)
        return Future(storage: mapped)
    }
}

/// The storage of a future made by `map`.
///
/// It is also the node that the source's handler holds, so each mapping step costs one
/// allocation.
///
/// `transform` is written once in `init` and taken once, by the single run of the source's
/// handler, which the source's state word orders after the initialization. `executor` never
/// changes, so any thread may read it.
@usableFromInline
internal final class MapStorage<Input: Sendable, Value: Sendable>: Storage<Value>, @unchecked Sendable {
    override internal var traceName: String {
        "map"
    }

    /// Where the transform runs; `nil` stands for the immediate executor.
    @usableFromInline
    internal let executor: (any Executor)?

    /// How to compute the value; dropped once used, so its captures are released.
    @exclusivity(unchecked)
    @usableFromInline
    internal var transform: (@Sendable (Input) -> Value)?

    /// Creates the storage of `transform` run on `executor`; `nil` stands for the immediate
    /// executor.
    @inlinable
    internal init(executor: (any Executor)?, transform: @escaping @Sendable (Input) -> Value) {
        self.executor = executor
        self.transform = transform
        super.init()
    }

    @usableFromInline
    override internal var fillingExecutor: (any Executor)? {
        executor
    }

    /// The link step that the source's handler runs.
    @inlinable
    internal static func receive(_ node: ChainNode, _ input: Input, _ queue: inout DrainQueue) {
        MapStorage.linked(node).receive(input, in: &queue)
    }

    @inlinable
    internal func receive(_ input: Input, in queue: inout DrainQueue) {
        guard let transform = transform.take() else {
            return
        }
        if let executor {
            executor.submit { [self] in
                _ = fill(transform(input))
            }
        } else {
            _ = resolve(transform(input), in: &queue)
        }
    }
}
