public import Dispatch

/// The read side of a value that is not known yet: wait for it, look at it, or ask to be
/// called with it.
///
/// A future is filled at most once. Every reader sees the same value, and every handler
/// added with ``upon(_:execute:)`` runs exactly once, on the executor it names, after the
/// value is known, whether it was added before or after the fill.
///
/// ``Deferred`` is the future you fill; ``Future`` is the read-only view you hand out.
/// Conform your own types to add new kinds of futures: implement the three requirements and
/// every combinator (`map`, `andThen`, `allFilled`, ...) works with them.
///
/// Code written against the protocol accepts any kind of future:
///
/// ```swift
/// func report(_ progress: some FutureProtocol<Int>) {
///     if let done = progress.peek() {
///         print("already done: \(done)%")
///     } else {
///         progress.upon(.main) { print("done: \($0)%") }
///     }
/// }
///
/// report(Future(filledWith: 100))
/// report(Deferred<Int>().lazy.map { $0 * 10 })
/// ```
///
/// Values are `Sendable` because a future shares one value with handlers on any number of
/// executors; futures are `Sendable` so that any thread may read them.
public protocol FutureProtocol<Value>: Sendable, CustomDebugStringConvertible, CustomReflectable {
    /// The type of the value.
    associatedtype Value: Sendable

    /// Calls `body` with the value, on `executor`, once the future is filled.
    ///
    /// If the value is already there, `body` is submitted to `executor` at once (on
    /// ``ImmediateExecutor`` it runs before `upon` returns). `body` and everything it
    /// captures are released right after it runs, or, if the future can never be filled
    /// any more, when the future is released.
    ///
    /// - Parameters:
    ///   - executor: Where `body` runs. See ``Executor``.
    ///   - body: Called exactly once with the value.
    func upon(_ executor: some Executor, execute body: @escaping @Sendable (Value) -> Void)

    /// Returns the value if the future is filled, or `nil` at once if it is not.
    func peek() -> Value?

    /// Calls `body`, isolated to the main actor, with the value once the future is filled.
    ///
    /// A requirement, so that generic code gets each future's own delivery: an ``Attempt``
    /// withdraws it when it is cancelled before `body` starts, through `some FutureProtocol` and
    /// `any FutureProtocol` too. Other futures take the default, which delivers every value.
    ///
    /// - Parameter body: Called once with the value on the main actor (exactly once, unless the
    ///   future withdraws its deliveries, as a cancelled attempt does).
    func uponMainActor(execute body: @escaping @MainActor @Sendable (Value) -> Void)

    /// Blocks the calling thread until the future is filled or `time` passes.
    ///
    /// A deadline in the past returns `nil` at once without blocking. Never wait on the
    /// executor that must fill the value (for example the serial queue whose work fills it):
    /// the wait would block that work and only end at the deadline. Debug builds stop with a
    /// message where they can tell for certain: waiting on the main queue, a `ThreadExecutor`
    /// or a `RunLoopExecutor` for a `map` whose transform is still to run there.
    ///
    /// - Parameter time: The latest time to wait until; `.distantFuture` waits indefinitely.
    /// - Returns: The value, or `nil` if `time` passed first.
    @available(
        *, noasync, message: "wait(until:) blocks the thread; use 'await future.value' or 'try await future.get()'"
    )
    func wait(until time: DispatchTime) -> Value?
}

extension FutureProtocol {
    /// Calls `body` with the value on a global concurrent Dispatch queue once the future is
    /// filled.
    ///
    /// Use ``upon(_:execute:)`` to choose where `body` runs.
    ///
    /// - Parameter body: Called exactly once with the value.
    @inlinable
    public func upon(execute body: @escaping @Sendable (Value) -> Void) {
        upon(DispatchQueue.global(), execute: body)
    }

    /// Whether the future has a value.
    @inlinable
    public var isFilled: Bool {
        peek() != nil
    }

    /// Blocks until the future is filled or `time` passes, by way of ``upon(_:execute:)``.
    ///
    /// This default implementation suits any future; it returns at once when the value is
    /// already there or the deadline has passed.
    ///
    /// - Parameter time: The latest time to wait until; `.distantFuture` waits indefinitely.
    /// - Returns: The value, or `nil` if `time` passed first.
    @available(
        *, noasync, message: "wait(until:) blocks the thread; use 'await future.value' or 'try await future.get()'"
    )
    public func wait(until time: DispatchTime) -> Value? {
        blockingWait(until: time, peek: peek) { signal in
            upon(ImmediateExecutor.shared) { _ in signal() }
        }
    }
}

extension FutureProtocol {
    /// A description for debugging, such as `Deferred(filled: 42)` or `Future(unfilled)`.
    ///
    /// An unfilled `Deferred`, `Future` or `Attempt` also says whether anything waits for its
    /// value (a handler, a derived future, a blocked thread or a task), and, if
    /// ``PendingFutures`` recorded it, where it was made:
    /// `Deferred(unfilled, waited for, made at App/ProfileService.swift:31)`.
    public var debugDescription: String {
        let typeName = String(describing: Self.self).prefix { $0 != "<" }
        guard let value = peek() else {
            guard let storage = (self as? any TrackedStorageHolder)?.trackedStorage else {
                return "\(typeName)(unfilled)"
            }
            var details = ""
            if storage.isTrackedWaitedFor {
                details += ", waited for"
            }
            if let place = PendingFutures.place(of: storage) {
                details += ", made at \(place)"
            }
            return "\(typeName)(unfilled\(details))"
        }
        return "\(typeName)(filled: \(String(reflecting: value)))"
    }

    /// A mirror that shows whether the future is filled and, if it is, its value.
    public var customMirror: Mirror {
        guard let value = peek() else {
            return Mirror(self, children: ["isFilled": false], displayStyle: .struct)
        }
        return Mirror(self, children: ["isFilled": true, "value": value], displayStyle: .struct)
    }
}

/// A future whose storage ``FutureProtocol/debugDescription`` may ask what waits for it.
internal protocol TrackedStorageHolder {
    /// The storage of this future, if it has one of its own.
    var trackedStorage: (any TrackedFuture)? { get }
}

extension FutureBacking {
    /// The storage, if this source has one.
    internal var trackedStorage: (any TrackedFuture)? {
        if case .storage(let storage) = self {
            return storage
        }
        return nil
    }
}

extension Deferred: TrackedStorageHolder {
    internal var trackedStorage: (any TrackedFuture)? { backing.trackedStorage }
}

extension Future: TrackedStorageHolder {
    internal var trackedStorage: (any TrackedFuture)? { backing.trackedStorage }
}

extension Attempt: TrackedStorageHolder {
    internal var trackedStorage: (any TrackedFuture)? { node }
}

extension FutureProtocol {
    /// Calls `body` with `owner` and the value, on `executor`, unless `owner` is gone by then.
    ///
    /// The future keeps only a weak reference to `owner`, so a pending request never keeps a
    /// screen or controller alive; if `owner` has been released when the value arrives, `body`
    /// is skipped and released.
    ///
    /// ```swift
    /// service.profile().upon(.main, owner: self) { screen, profile in screen.show(profile) }
    /// ```
    ///
    /// - Parameters:
    ///   - executor: Where `body` runs.
    ///   - owner: The object `body` works on; held weakly.
    ///   - body: Called at most once, with `owner` and the value.
    public func upon<Owner: AnyObject & Sendable>(
        _ executor: some Executor,
        owner: Owner,
        execute body: @escaping @Sendable (Owner, Value) -> Void
    ) {
        upon(executor) { [weak owner] value in
            if let owner {
                body(owner, value)
            }
        }
    }
}

// MARK: - Linking: how every combinator attaches a node to a future

/// The link layer's entry point: how every combinator attaches a node to the future it reads.
///
/// A *link* is a handler that holds the node it continues (a ``ChainNode``) and a step that
/// receives the node, the value and the running ``DrainQueue``. Because the handler names its
/// node, releasing an unfilled chain walks it with a loop (``ReleaseStack``), and because the
/// step fills the node through the running queue, filling a chain of any length runs in
/// constant stack space. Combinators call ``FutureProtocol/link(_:_:)`` and nothing else; only
/// nodes (the types in this folder and the attempt nodes) see a drain queue.
///
/// This type is the step every link shares: it receives the node it continues, the value and
/// the running queue.
@usableFromInline
internal typealias LinkStep<Value> = @Sendable (ChainNode, Value, inout DrainQueue) -> Void

extension FutureProtocol {
    /// Links `node` to this future: `step` runs once with `node` and the value, once the value
    /// is known, then whatever that completes runs before this call returns if the value is
    /// known already.
    ///
    /// This is the one place a combinator starts a drain: it owns the trampoline.
    @inlinable
    internal func link(_ node: ChainNode, _ step: @escaping LinkStep<Value>) {
        if let future = self as? Future<Value> {
            future.backing.link(node, step)
        } else if let deferred = self as? Deferred<Value> {
            deferred.backing.link(node, step)
        } else {
            DrainQueue.draining { addLink(node, in: &$0, step) }
        }
    }

    /// Adds a link step through the caller's running queue, taking the lock-free path when
    /// this future is backed by the library's storage or is a view of such a future, the value
    /// in place when another kind of future has one, and an `upon` callback otherwise.
    ///
    /// For nodes, which already run under a queue; combinators call ``link(_:_:)``.
    @inlinable
    internal func addLink(
        _ node: ChainNode,
        in queue: inout DrainQueue,
        _ step: @escaping LinkStep<Value>
    ) {
        if let future = self as? Future<Value> {
            future.backing.addLink(node, in: &queue, step)
        } else if let deferred = self as? Deferred<Value> {
            deferred.backing.addLink(node, in: &queue, step)
        } else if let view = self as? any FutureView {
            view.addLinkThroughView(node, in: &queue, step)
        } else if let value = peek() {
            // A future of another kind that has its value already: take it in place, through
            // the running queue, so that a chain through such futures does not nest.
            step(node, value, &queue)
        } else {
            // Filled later, by code outside the library: the step starts a drain of its own. A
            // future that drops the callback unrun loses the node's decider.
            let guarded = DroppableCallback(node)
            upon(ImmediateExecutor.shared) { value in
                guarded.run { node in
                    var queue = DrainQueue()
                    step(node, value, &queue)
                    queue.drain()
                }
            }
        }
    }
}

/// A future that is a view of another future rather than a storage of its own:
/// ``LazyMapFuture`` and ``IgnoringFuture``.
///
/// A combinator over a view links straight to the storage underneath, through the caller's
/// drain queue. Linked through `upon` instead, each view in a chain would start a drain of its
/// own inside the one before, and a long enough chain would overflow the stack.
///
/// The protocol names no primary associated type on purpose: a future is recognized as a view
/// with a plain conformance check, which the runtime caches, where a cast to
/// `any FutureView<Value>` would check the same-type requirement afresh each time (a debug
/// build spent a quarter of a view chain's time there).
@usableFromInline
internal protocol FutureView: FutureProtocol {
    /// Adds a combinator's link step to the future underneath, adapting its value.
    ///
    /// - Precondition: `Linked` is `Value`; the step receives each value through a checked
    ///   cast that folds away once the caller is specialized.
    func addLinkThroughView<Linked>(
        _ node: ChainNode,
        in queue: inout DrainQueue,
        _ step: @escaping @Sendable (ChainNode, Linked, inout DrainQueue) -> Void
    )
}
