extension FutureProtocol {
    /// Returns a future filled with the value of the future that `start` makes from this
    /// future's value.
    ///
    /// Use it to chain asynchronous steps, each of which needs the previous one's result:
    ///
    /// ```swift
    /// let avatar: Future<Image> = api.user(id: 7).andThen(upon: .global()) { user in
    ///     api.image(at: user.avatarURL)
    /// }
    /// ```
    ///
    /// `start` runs once, on `executor`, as soon as this future is filled, and is released
    /// right after. Chains of any length on ``ImmediateExecutor`` fill without growing the
    /// stack.
    ///
    /// - Parameters:
    ///   - executor: Where `start` runs. See ``Executor``.
    ///   - start: Begins the next step and returns its future.
    /// - Returns: A read-only future of the next step's value.
    @inlinable
    public func andThen<NextFuture: FutureProtocol>(
        upon executor: some Executor,
        start: @escaping @Sendable (Value) -> NextFuture
    ) -> Future<NextFuture.Value> {
        if executor.runsInPlace, let value = peek() {
            return Future(start(value))
        }
        let next = AndThenStorage(executor: executor.runsInPlace ? nil : executor, start: start)
        link(next, AndThenStorage<Value, NextFuture>.receive)
        return Future(storage: next)
    }
}

/// The storage of a future made by `andThen`: it runs `start` with the source's value, then
/// follows the future that `start` returns.
///
/// `step` is written once in `init` and taken once, by the single run of the source's handler.
@usableFromInline
internal final class AndThenStorage<Input: Sendable, Inner: FutureProtocol>: Storage<Inner.Value>,
    @unchecked Sendable
{
    override internal var traceName: String {
        "andThen"
    }

    /// Where and how to start the next future; dropped once used.
    @exclusivity(unchecked)
    @usableFromInline
    internal var step: (executor: (any Executor)?, start: @Sendable (Input) -> Inner)?

    /// Creates the storage of `start` run on `executor`; `nil` stands for the immediate
    /// executor.
    @inlinable
    internal init(executor: (any Executor)?, start: @escaping @Sendable (Input) -> Inner) {
        step = (executor, start)
        super.init()
    }

    /// The link step that the source's handler runs.
    @inlinable
    internal static func receive(_ node: ChainNode, _ input: Input, _ queue: inout DrainQueue) {
        AndThenStorage.linked(node).receive(input, in: &queue)
    }

    @inlinable
    internal func receive(_ input: Input, in queue: inout DrainQueue) {
        guard let (executor, start) = step.take() else {
            return
        }
        if let executor {
            executor.submit { [self] in
                var queue = DrainQueue()
                follow(start(input), in: &queue)
                queue.drain()
            }
        } else {
            follow(start(input), in: &queue)
        }
    }
}

extension DeferredStorage {
    /// Fills this storage with `future`'s value once it has one.
    @inlinable
    internal final func follow<Source: FutureProtocol>(_ future: Source, in queue: inout DrainQueue)
    where Source.Value == Value {
        future.addLink(self, in: &queue, DeferredStorage.forward)
    }

    /// The link step that fills the storage `node` with `value`, unless it is filled already.
    @inlinable
    internal static func forward(_ node: ChainNode, _ value: Value, _ queue: inout DrainQueue) {
        _ = DeferredStorage.linked(node).resolve(value, in: &queue)
    }
}
