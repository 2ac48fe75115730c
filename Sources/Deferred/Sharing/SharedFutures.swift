/// One run of the work per key, shared by every caller that asks for the key while it runs: the
/// plain-future form of ``SharedAttempts``, for work that cannot fail or be called off.
///
/// ```swift
/// final class ThumbnailCache: Sendable {
///     private let renders = SharedFutures<Photo.ID, Thumbnail>()
///
///     func thumbnail(of photo: Photo) -> Future<Thumbnail> {
///         renders.future(for: photo.id) { _ in Future(upon: .global()) { render(photo) } }
///     }
/// }
/// ```
///
/// The first caller's `start` starts the run; every caller that asks while it runs gets a future
/// of the same value, and `start` does not run for them. When the work fills, the key is forgotten
/// before any caller can see the value (or, made with ``init(keepingValuesFor:upon:)``, the
/// value is kept for a while), so a caller who has seen it and asks again starts a new run. A future cannot
/// be cancelled, so the run goes on even if every caller drops its future; use ``SharedAttempts``
/// for work that should stop when nobody wants it.
///
/// Every method may be called from any thread; `start` runs outside the table's lock, as in
/// ``SharedAttempts``. Joining a run in flight allocates nothing: every caller gets a future of
/// the run itself. So a run whose work never fills (a lost `Deferred`) stays joined until
/// ``forget(_:)`` drops it; ``PendingFutures`` finds such a writer. Nor does a run whose `start`
/// waits, directly or through other keys, for the run of its own key: it would wait for itself.
public final class SharedFutures<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    @usableFromInline
    internal typealias Table = SharedTable<Key, Storage<Value>, Value>

    @usableFromInline
    internal let table: Table

    /// Creates a table that forgets each key as soon as its run fills.
    public init() {
        table = Table(retention: nil)
    }

    /// Creates a table that keeps a run's value for `duration`, counted on `executor`.
    ///
    /// A caller that asks for the key meanwhile gets a future that has the value already, and
    /// `start` does not run.
    ///
    /// - Parameters:
    ///   - duration: How long a value is kept; zero or less keeps none.
    ///   - executor: Where the time is counted.
    public init(keepingValuesFor duration: Duration, upon executor: some SchedulingExecutor) {
        table = Table(retention: .init(executor: executor) { _ in duration > .zero ? duration : nil })
    }

    /// Returns a future of the run for `key`: the one in flight, a kept value, or a new run that
    /// `start` starts now.
    ///
    /// `start` runs on the calling thread before this returns, only if no run for `key` is in
    /// flight (or kept).
    ///
    /// - Parameters:
    ///   - key: What identifies the work.
    ///   - start: Starts the work for `key`.
    /// - Returns: A future of the run's value.
    @inlinable
    public func future<Work: FutureProtocol<Value>>(for key: Key, start: (Key) -> Work) -> Future<Value> {
        let found = table.find(key, join: { _ in () }, makeRun: { _ in (Storage<Value>(), ()) })
        switch found {
        case .kept(let value):
            return Future(filledWith: value)
        case .joined(let run, _):
            return Future(storage: run)
        case .started(let run, _, let generation):
            var queue = DrainQueue()
            // A link step, not a callback, so that a chain of runs (one key's work waiting for
            // another's) fills in constant stack. It forgets the key before it fills the run, so
            // that a caller who has seen the value and asks again starts a new run instead of
            // joining the finished one.
            start(key).addLink(run, in: &queue) { [weak table] node, value, queue in
                table?.ended(key, generation: generation, keeping: value)
                _ = Storage<Value>.linked(node).resolve(value, in: &queue)
            }
            queue.drain()
            return Future(storage: run)
        }
    }

    /// How many keys have a run in flight or a kept value.
    public var count: Int { table.count }

    /// Whether `key` leads to the future of a run in flight or to a kept value.
    ///
    /// - Parameter key: The key to look for.
    /// - Returns: `false` if a caller asking for `key` now would start a new run.
    public func contains(_ key: Key) -> Bool { table.contains(key) }

    /// Forgets `key`: drops a kept value, or lets the run in flight go on for the callers that
    /// have its future, without new ones; the next caller starts a new run.
    ///
    /// - Parameter key: The key to forget.
    public func forget(_ key: Key) { table.forget(key) }
}
