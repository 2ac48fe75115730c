public import Dispatch

/// A future that reports only *that* its base future was filled, not with what.
///
/// Use it where a value would leak detail or where only completion matters:
///
/// ```swift
/// let saved: IgnoringFuture<Future<Int>> = saveDocument().ignored()
/// saved.upon(.main) { print("Saved") }
/// ```
///
/// It is a view: it adds no storage and reads through to its base.
public struct IgnoringFuture<Base: FutureProtocol>: FutureProtocol {
    /// An ignoring future's value carries nothing.
    public typealias Value = Void

    /// The future whose filling this future reports.
    public let base: Base

    /// Creates a future that is filled when `base` is, with no value.
    ///
    /// - Parameter base: The future to watch.
    @inlinable
    public init(_ base: Base) {
        self.base = base
    }

    /// Calls `body` on `executor` once the base future is filled.
    ///
    /// - Parameters:
    ///   - executor: Where `body` runs. See ``Executor``.
    ///   - body: Called exactly once, then released.
    @inlinable
    public func upon(_ executor: some Executor, execute body: @escaping @Sendable (()) -> Void) {
        base.upon(executor) { _ in body(()) }
    }

    /// Returns `()` if the base future is filled, or `nil` at once if it is not.
    @inlinable
    public func peek() -> Void? {
        base.peek().map { _ in () }
    }

    /// Blocks until the base future is filled or `time` passes.
    ///
    /// - Parameter time: The latest time to wait until; `.distantFuture` waits indefinitely.
    /// - Returns: `()`, or `nil` if `time` passed first.
    @available(
        *, noasync, message: "wait(until:) blocks the thread; use 'await future.value' or 'try await future.get()'"
    )
    @inlinable
    public func wait(until time: DispatchTime) -> Void? {
        base.wait(until: time).map { _ in () }
    }

    /// This future itself: ignoring twice changes nothing.
    @inlinable
    public func ignored() -> IgnoringFuture<Base> {
        self
    }
}

extension FutureProtocol {
    /// Returns a future that is filled when this one is, without its value.
    ///
    /// It allocates nothing.
    @inlinable
    public func ignored() -> IgnoringFuture<Self> {
        IgnoringFuture(self)
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
