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
    internal let backing: FutureBacking<Value>

    @inlinable
    internal init(backing: FutureBacking<Value>) {
        self.backing = backing
    }

    @inlinable
    internal init(storage: Storage<Value>) {
        backing = .storage(storage)
    }

    /// Creates a read-only view of `deferred`.
    ///
    /// - Parameter deferred: The deferred whose value this future delivers.
    @inlinable
    public init(_ deferred: Deferred<Value>) {
        backing = deferred.backing
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
            backing = deferred.backing
        } else if let lazy = base as? any ErasableLazyView {
            backing = lazy.erasedBacking()
        } else {
            backing = .erased(AnyFutureBox(base))
        }
    }

    /// Creates a future that is already filled with `value`.
    ///
    /// - Parameter value: The value every reader sees.
    @_disfavoredOverload  // `Future { await work() }` means the async initializer, not a closure value.
    @inlinable
    public init(filledWith value: Value) {
        backing = .filled(value)
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
        Future(backing: .never)
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
        backing.upon(executor, execute: body)
    }

    /// Returns the value if the future is filled, or `nil` at once if it is not.
    @inlinable
    public func peek() -> Value? {
        backing.peek()
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
        backing.wait(until: time)
    }

    /// Whether the future has a value.
    @inlinable
    public var isFilled: Bool {
        backing.isFilled
    }
}

extension FutureProtocol {
    /// Returns this future as a read-only, type-erased ``Future``.
    @inlinable
    public func eraseToFuture() -> Future<Value> {
        Future(self)
    }
}

extension Future {
    /// Creates a future and calls `body` at once with the deferred that fills it, for work that
    /// reports its result through a callback.
    ///
    /// ```swift
    /// let reply = Future<Data> { deferred in
    ///     legacyClient.fetch(url) { data in deferred.fill(with: data) }
    /// }
    /// ```
    ///
    /// `body` runs once, on the calling thread, before the initializer returns; the future is
    /// read-only to everybody else. The first fill counts, as for any ``Deferred``.
    ///
    /// It is for work that reports through a callback. To go on from another future, use
    /// ``FutureProtocol/map(upon:transform:)`` or ``FutureProtocol/andThen(upon:start:)``: a
    /// chain of producers that each fill from another future's `upon` handler fills and is
    /// released recursively, one stack frame per link, where those combinators use a loop.
    ///
    /// - Parameters:
    ///   - file: Where the future is made, for ``PendingFutures``; leave the default.
    ///   - line: The line where the future is made; leave the default.
    ///   - body: Starts the work, and fills the deferred when it is done.
    public init(file: StaticString = #fileID, line: UInt = #line, _ body: (_ deferred: Deferred<Value>) -> Void) {
        let deferred = Deferred<Value>(file: file, line: line)
        body(deferred)
        self.init(deferred)
    }

    /// Creates a future that is filled with `value` once `delay` has passed.
    ///
    /// ```swift
    /// let later = Future(filledWith: "tick", after: .seconds(1), upon: DispatchQueue.global())
    /// ```
    ///
    /// It is `Future(filledWith: value).delay(by: delay, upon: executor)`.
    ///
    /// - Parameters:
    ///   - value: The value every reader sees.
    ///   - delay: How long to wait first.
    ///   - executor: The executor that measures the delay and fills the future.
    public init(filledWith value: Value, after delay: Duration, upon executor: some SchedulingExecutor) {
        self = Future(filledWith: value).delay(by: delay, upon: executor)
    }
}

extension Deferred {
    /// Fills this deferred of a result with a success.
    ///
    /// ```swift
    /// let login = Deferred<Result<Session, LoginError>>()
    /// login.succeed(with: session)
    /// ```
    ///
    /// - Parameter value: The success.
    /// - Returns: `true` if this call filled the deferred, `false` if it was already filled.
    @discardableResult
    public func succeed<Success, Failure>(with value: Success) -> Bool where Value == Result<Success, Failure> {
        fill(with: .success(value))
    }

    /// Fills this deferred of a result with a failure.
    ///
    /// - Parameter error: The failure.
    /// - Returns: `true` if this call filled the deferred, `false` if it was already filled.
    @discardableResult
    public func fail<Success, Failure>(with error: Failure) -> Bool where Value == Result<Success, Failure> {
        fill(with: .failure(error))
    }
}

extension Future {
    /// Runs `work` on `executor` and returns a read-only future filled with its result.
    ///
    /// ```swift
    /// let checksum = Future { computeChecksum(of: file) }  // on a global Dispatch queue
    /// let thumbnail = Future(upon: renderQueue) { render(photo) }
    /// checksum.upon(.main) { label.text = $0 }
    /// ```
    ///
    /// This is the simple future of 2014: work that runs in the background, and a value to wait
    /// for. A closure that awaits makes a task instead (``init(priority:operation:)``). To make
    /// a future whose *value* is a closure, write `Future(filledWith: closure)`.
    ///
    /// - Parameters:
    ///   - executor: Where `work` runs. The default is a global concurrent Dispatch queue.
    ///   - work: Computes the value; it runs exactly once.
    @inlinable
    public init(upon executor: some Executor = DispatchQueue.global(), _ work: @escaping @Sendable () -> Value) {
        let storage = Storage<Value>()
        executor.submit {
            _ = storage.fill(work())
        }
        self.init(storage: storage)
    }

    /// Runs `work` on `executor` and returns a future filled with its result.
    @_documentation(visibility: internal)
    @available(*, deprecated, renamed: "init(upon:_:)")
    @inlinable
    public static func async(
        upon executor: some Executor = DispatchQueue.global(),
        execute work: @escaping @Sendable () -> Value
    ) -> Future<Value> {
        Future(upon: executor, work)
    }
}

extension Future {
    /// Starts `operation` in a new task and returns a read-only future filled with its result.
    ///
    /// ```swift
    /// let thumbnail = Future { await renderer.thumbnail(for: photo) }
    /// thumbnail.upon(.main) { cell.image = $0 }
    /// ```
    ///
    /// The task inherits the caller's task-local values and, unless `priority` says otherwise,
    /// its priority, like `Task.init`.
    ///
    /// - Parameters:
    ///   - priority: The priority of the task; `nil` inherits it.
    ///   - operation: The work whose result fills the future.
    public init(priority: TaskPriority? = nil, operation: sending @escaping @isolated(any) () async -> Value) {
        let storage = Storage<Value>()
        Task(executorPreference: BridgeTasks.executor, priority: priority) {
            _ = storage.fill(await operation())
        }
        self.init(storage: storage)
    }
}
