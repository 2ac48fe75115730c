/// The storage of a future made by `map`.
///
/// It is also the node that the source's handler holds, so each mapping step costs one
/// allocation.
///
/// `step` is written once in `init` and taken once, by the single run of the source's handler,
/// which the source's state word orders after the initialization.
@usableFromInline
internal final class MapStorage<Input: Sendable, Value: Sendable>: Storage<Value>, @unchecked Sendable {
    /// Where and how to compute the value; dropped once used, so its captures are released.
    @exclusivity(unchecked)
    @usableFromInline
    internal var step: (executor: (any Executor)?, transform: @Sendable (Input) -> Value)?

    /// Creates the storage of `transform` run on `executor`; `nil` stands for the immediate
    /// executor.
    @inlinable
    internal init(executor: (any Executor)?, transform: @escaping @Sendable (Input) -> Value) {
        step = (executor, transform)
        super.init()
    }

    /// The link step that the source's handler runs.
    @inlinable
    internal static func receive(_ node: ChainNode, _ input: Input, _ queue: inout DrainQueue) {
        unsafeDowncast(node, to: MapStorage.self).receive(input, in: &queue)
    }

    @inlinable
    internal func receive(_ input: Input, in queue: inout DrainQueue) {
        guard let (executor, transform) = step.take() else {
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
