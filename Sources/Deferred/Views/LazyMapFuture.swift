public import Dispatch

/// A future whose value is its base future's value passed through a transform, computed
/// afresh on every read.
///
/// Made by ``FutureProtocol/every(per:)``. Unlike ``FutureProtocol/map(upon:transform:)``,
/// which runs its transform once and stores the result, a lazy map stores nothing: each
/// handler, `peek` and `wait` applies the transform again: `peek` and `wait` on the calling
/// thread, `upon` on the handler's executor just before the handler. Futures derived from this
/// one (`map`, `and`, `allFilled`, ...) apply it where the base's value is delivered, usually
/// on the thread that fills the base. Use it for cheap projections such as picking a field.
///
/// ```swift
/// let size = Deferred<(width: Int, height: Int)>()
/// let width: LazyMapFuture<Deferred<(width: Int, height: Int)>, Int> = size.every { $0.width }
/// width.upon(.main) { print("width: \($0)") }
/// size.fill(with: (width: 640, height: 480))
/// ```
public struct LazyMapFuture<Base: FutureProtocol, Value: Sendable>: FutureProtocol {
    /// The future whose value this future transforms.
    public let base: Base

    @usableFromInline
    internal let transform: LazyTransform<Base.Value, Value>

    @inlinable
    internal init(base: Base, transform: LazyTransform<Base.Value, Value>) {
        self.base = base
        self.transform = transform
    }

    /// Calls `body` with the transformed value, on `executor`, once the base future is filled.
    ///
    /// The transform runs on `executor` too, just before `body`.
    ///
    /// - Parameters:
    ///   - executor: Where the transform and `body` run. See ``Executor``.
    ///   - body: Called exactly once with the transformed value, then released.
    @inlinable
    public func upon(_ executor: some Executor, execute body: @escaping @Sendable (Value) -> Void) {
        base.upon(executor) { [transform] value in body(transform(value)) }
    }

    /// Returns the transformed value if the base future is filled, or `nil` at once.
    @inlinable
    public func peek() -> Value? {
        base.peek().map { transform($0) }
    }

    /// Blocks until the base future is filled or `time` passes, then transforms its value.
    ///
    /// - Parameter time: The latest time to wait until; `.distantFuture` waits indefinitely.
    /// - Returns: The transformed value, or `nil` if `time` passed first.
    @available(
        *, noasync, message: "wait(until:) blocks the thread; use 'await future.value' or 'try await future.get()'"
    )
    @inlinable
    public func wait(until time: DispatchTime) -> Value? {
        base.wait(until: time).map { transform($0) }
    }
}

extension FutureProtocol {
    /// Returns a view of this future whose value is `transform` applied to this one's, on every
    /// read.
    ///
    /// Nothing is computed or stored up front, and no allocation is made; every handler,
    /// `peek` and `wait` runs `transform` again:
    ///
    /// ```swift
    /// let user: Future<User> = service.currentUser()
    /// let name = user.every { $0.name }
    /// name.upon(.main) { label.text = $0 }
    /// ```
    ///
    /// - Parameter transform: A cheap, pure function of the value.
    /// - Returns: A future that delivers the transformed value.
    @inlinable
    public func every<NewValue: Sendable>(
        per transform: @escaping @Sendable (Value) -> NewValue
    ) -> LazyMapFuture<Self, NewValue> {
        LazyMapFuture(base: self, transform: .single(transform))
    }
}

extension LazyMapFuture {
    /// Returns a view of the same base future whose value is `transform` applied to this view's
    /// value, on every read.
    ///
    /// `every` over `every` makes one view with a chain of steps rather than a view of a view,
    /// so chains of any length are read, filled and released without deep recursion.
    ///
    /// - Parameter transform: A cheap, pure function of the value.
    /// - Returns: A future that delivers the transformed value.
    @inlinable
    public func every<NewValue: Sendable>(
        per transform: @escaping @Sendable (Value) -> NewValue
    ) -> LazyMapFuture<Base, NewValue> {
        LazyMapFuture<Base, NewValue>(base: base, transform: self.transform.appending(transform))
    }
}
