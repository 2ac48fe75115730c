public import Dispatch

/// A read-only, type-erased view of a value that is not known yet.
///
/// Hand out a `Future` where you keep the ``Deferred`` that fills it private: readers can
/// wait for the value but cannot decide it.
///
/// ```swift
/// let reply = Deferred<Int>()
/// let answer: Future<Int> = Future(reply)
/// answer.upon(.main) { print("The answer is \($0)") }
/// reply.fill(with: 42)
/// ```
///
/// Wrapping a `Deferred` or another `Future` allocates nothing, and ``init(filledWith:)`` and
/// ``never`` allocate nothing either. Other kinds of futures are boxed once.
public struct Future<Value: Sendable>: FutureProtocol {
    @usableFromInline
    internal let source: FutureSource<Value>

    @inlinable
    internal init(source: FutureSource<Value>) {
        self.source = source
    }

    @inlinable
    internal init(storage: Storage<Value>) {
        source = .storage(storage)
    }

    /// Creates a read-only view of `deferred`.
    ///
    /// - Parameter deferred: The deferred whose value this future delivers.
    @inlinable
    public init(_ deferred: Deferred<Value>) {
        source = deferred.source
    }

    /// Creates a read-only view of any future.
    ///
    /// A ``Future`` or ``Deferred`` is not wrapped a second time, and a lazy map over a lazy
    /// map made this way becomes one view with the steps of both.
    ///
    /// - Parameter base: The future whose value this future delivers.
    @inlinable
    public init(_ base: some FutureProtocol<Value>) {
        if let future = base as? Future<Value> {
            self = future
        } else if let deferred = base as? Deferred<Value> {
            source = deferred.source
        } else if let lazy = base as? any ErasableLazyView {
            source = lazy.erasedSource()
        } else {
            source = .erased(AnyFutureBox(base))
        }
    }

    /// Creates a future that is already filled with `value`.
    ///
    /// - Parameter value: The value every reader sees.
    @_disfavoredOverload  // `Future { await work() }` means the async initializer, not a closure value.
    @inlinable
    public init(filledWith value: Value) {
        source = .filled(value)
    }

    /// Creates a future that is already filled with `value`.
    @_documentation(visibility: internal)
    @available(*, deprecated, renamed: "init(filledWith:)")
    @_disfavoredOverload
    @inlinable
    public init(value: Value) {
        self.init(filledWith: value)
    }

    /// A future that is never filled.
    ///
    /// Its handlers never run and are released at once; waiting on it lasts until the deadline.
    @inlinable
    public static var never: Future<Value> {
        Future(source: .never)
    }

    /// Calls `body` with the value, on `executor`, once the future is filled.
    ///
    /// If the value is already there, `body` is submitted to `executor` at once (on
    /// ``ImmediateExecutor`` it runs before `upon` returns).
    ///
    /// - Parameters:
    ///   - executor: Where `body` runs. See ``Executor``.
    ///   - body: Called exactly once with the value, then released.
    @inlinable
    public func upon(_ executor: some Executor, execute body: @escaping @Sendable (Value) -> Void) {
        source.upon(executor, execute: body)
    }

    /// Returns the value if the future is filled, or `nil` at once if it is not.
    @inlinable
    public func peek() -> Value? {
        source.peek()
    }

    /// Blocks the calling thread until the future is filled or `time` passes.
    ///
    /// Returns at once, without allocating, when the value is there; returns `nil` at once
    /// when `time` has passed. Never wait on the executor whose work fills this future.
    ///
    /// - Parameter time: The latest time to wait until; `.distantFuture` waits indefinitely.
    /// - Returns: The value, or `nil` if `time` passed first.
    @available(
        *, noasync, message: "wait(until:) blocks the thread; use 'await future.value' or 'try await future.get()'"
    )
    @inlinable
    public func wait(until time: DispatchTime) -> Value? {
        source.wait(until: time)
    }

    /// Whether the future has a value.
    @inlinable
    public var isFilled: Bool {
        source.isFilled
    }
}

extension FutureProtocol {
    /// Returns this future as a read-only, type-erased ``Future``.
    @inlinable
    public func eraseToFuture() -> Future<Value> {
        Future(self)
    }
}
