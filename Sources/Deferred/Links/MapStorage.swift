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
