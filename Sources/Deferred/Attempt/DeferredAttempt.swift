public import Dispatch

/// The writing side of an ``Attempt``: complete it with a success or a failure, and learn when
/// its consumer cancels it.
///
/// Keep it with the work and hand out ``attempt``:
///
/// ```swift
/// func download(_ url: URL) -> Attempt<Data, any Error> {
///     let download = DeferredAttempt<Data, any Error>()
///     let request = client.get(url) { result in download.fill(with: result) }
///     download.onCancel { request.cancel() }
///     return download.attempt
/// }
/// ```
///
/// The first of completing and cancelling wins; whatever comes later changes nothing. The
/// cancel handlers reach the work even if the producer keeps no reference to its
/// `DeferredAttempt`: the attempts that consumers hold keep them.
///
/// ## A writer cannot be lost silently
///
/// A `DeferredAttempt` is noncopyable: there is one writer, and when it goes away (at the end of
/// the scope that owns it, or when the closure or object that took it is released) while its
/// attempt is still pending, nothing can finish the attempt any more. So it fails there and then,
/// as if `fail(with:)` were called where the writer was released:
/// - with ``AbandonedError``, naming the writer's type and where it was made, if `Failure` is
///   `any Error`;
/// - with `Failure.abandoned` if `Failure` is an ``AbandonableError``.
///
/// Readers tell it apart from a cancellation and from the work's own errors, and the
/// producer's cancel handlers do not run: nobody cancelled. A failure type with neither cannot
/// say "abandoned": its attempt is *orphaned* instead. It never gets a result: its handlers and
/// the producer's cancel handlers are released unrun, and so is every attempt derived from it
/// that nothing else can decide; a wait times out, and a task's `get()` waits until its task is
/// cancelled. To let readers tell, give the type an `abandoned` case.
///
/// Handlers on ``ImmediateExecutor`` run where the writer is released, so do not release it
/// under a lock that they take. A writer that its own attempt keeps alive (captured by its own
/// `onCancel` handler or by a handler of its attempt, directly or through objects they hold) is
/// not lost until the attempt finishes or is cancelled.
///
/// Closures capture the writer without copying it, and it lives as long as they do:
///
/// ```swift
/// let writer = DeferredAttempt<Int, any Error>()
/// DispatchQueue.global().async { writer.succeed(with: 42) }
/// return writer.attempt  // if the closure were dropped unrun, the attempt would fail at once
/// ```
///
/// To keep writers in a collection, or in a property set after `init`, keep each in a
/// ``DeferredAttemptBox``, which hands the writer out once; releasing the box with the writer
/// still in it releases the writer.
///
/// Generic code over any promise admits a writer with `& ~Copyable` and borrows it:
/// `func answer<P: PromiseProtocol & ~Copyable>(_ promise: borrowing P, with value: P.Value)`.
public struct DeferredAttempt<Success: Sendable, Failure: Error>: ~Copyable, PromiseProtocol {
    /// An attempt's value: its success or its failure.
    public typealias Value = Result<Success, Failure>

    @usableFromInline
    internal let node: AttemptNode<Success, Failure>

    /// Where the writer was made, for ``AbandonedError``.
    @usableFromInline
    internal let file: StaticString

    /// The line where the writer was made.
    @usableFromInline
    internal let line: UInt

    /// Creates an attempt that has not finished.
    ///
    /// A cancellation fails it with `Failure.cancelled` if `Failure` is a
    /// ``CancellableError``, and with `CancellationError` if `Failure` is `any Error`. For any
    /// other failure type, use ``init(cancellationError:file:line:)`` to say what a cancellation
    /// fails with; without it, cancelling tells the producer and withdraws the callbacks, but the
    /// attempt finishes only when the producer fills it.
    ///
    /// - Parameters:
    ///   - file: Where the writer is made, for ``AbandonedError``; leave the default.
    ///   - line: The line where the writer is made; leave the default.
    @inlinable
    public init(file: StaticString = #fileID, line: UInt = #line) {
        self.init(cancellation: nil, file: file, line: line)
    }

    /// Creates an attempt that has not finished, for generic code over ``PromiseProtocol``.
    ///
    /// It is ``init(file:line:)`` without a place: an ``AbandonedError`` names the type only.
    @_disfavoredOverload
    @inlinable
    public init() {
        self.init(file: "(unknown)", line: 0)
    }

    /// Fails a pending attempt as abandoned: see ``AbandonedError``.
    deinit {
        if node.isTraced {
            node.traceWriterReleased()
        }
        if !node.isDecided {
            node.abandon(file: file, line: line)
        }
    }

    /// Creates an attempt that has not finished and fails with `cancellationError` if it is
    /// cancelled.
    ///
    /// Use it for failure types that have no cancellation case of their own:
    ///
    /// ```swift
    /// let decoding = DeferredAttempt<Int, DecodingError>(
    ///     cancellationError: .dataCorrupted(.init(codingPath: [], debugDescription: "cancelled"))
    /// )
    /// ```
    ///
    /// Attempts derived from this one fail with the same error when they are cancelled.
    ///
    /// - Parameters:
    ///   - cancellationError: The failure of a cancelled attempt.
    ///   - file: Where the writer is made, for ``AbandonedError``; leave the default.
    ///   - line: The line where the writer is made; leave the default.
    public init(cancellationError: Failure, file: StaticString = #fileID, line: UInt = #line) {
        self.init(cancellation: CancellationErrorBox(cancellationError), file: file, line: line)
    }

    /// Creates the writer of a new attempt whose cancellation error `cancellation` gives (`nil`
    /// for its failure type's own), recorded where the debugging registry records.
    @inlinable
    internal init(cancellation: CancellationErrorBox<Failure>?, file: StaticString, line: UInt) {
        node = AttemptNode(cancellation: cancellation)
        self.file = file
        self.line = line
        if PendingFutures.isRecording {
            PendingFutures.record(
                node, typeName: .deferredAttempt(success: Success.self, failure: Failure.self), file: file, line: line)
        }
    }

    /// The writer's type as reports name it, such as `DeferredAttempt<Data, any Error>`.
    @usableFromInline
    internal static var typeName: String {
        let failure = Failure.self == (any Error).self ? "any Error" : "\(Failure.self)"
        return "DeferredAttempt<\(Success.self), \(failure)>"
    }

    /// The read-only attempt that this completes.
    @inlinable
    public var attempt: Attempt<Success, Failure> {
        Attempt(node: node)
    }

    /// Completes the attempt with `result` unless it has finished.
    ///
    /// When this returns, with either result, the attempt's result is visible.
    ///
    /// - Parameter result: The success or failure every reader sees.
    /// - Returns: `true` if this call completed the attempt; `false` if it had finished, for
    ///   instance because it was cancelled.
    @inlinable
    @discardableResult
    public func fill(with result: Result<Success, Failure>) -> Bool {
        guard node.decide(result) else {
            node.awaitPublication()
            return false
        }
        return true
    }

    /// Completes the attempt with a success unless it has finished.
    ///
    /// - Parameter value: The value every reader sees.
    /// - Returns: `true` if this call completed the attempt.
    @inlinable
    @discardableResult
    public func succeed(with value: Success) -> Bool {
        fill(with: .success(value))
    }

    /// Completes the attempt with a failure unless it has finished.
    ///
    /// - Parameter error: The error every reader sees.
    /// - Returns: `true` if this call completed the attempt.
    @inlinable
    @discardableResult
    public func fail(with error: Failure) -> Bool {
        fill(with: .failure(error))
    }

    /// Registers what cancelling means: `handler` runs once if the attempt is cancelled before
    /// it completes, at once if it already was, and never if it completes first.
    ///
    /// It runs on the thread that cancels (the one calling `cancel()`, or giving up the last
    /// demand), so keep it short: cancel a request, close a file, flag a loop to stop.
    ///
    /// - Parameter handler: Stops the work.
    public func onCancel(_ handler: @escaping @Sendable () -> Void) {
        node.onCancel(handler)
    }

    /// Whether the attempt was cancelled.
    ///
    /// Long-running work may check it to stop early.
    @inlinable
    public var isCancelled: Bool {
        node.isCancelled
    }

    // The read side is the attempt's: each of these is ``attempt``'s own.

    /// Whether the attempt has finished: ``Attempt/isFilled``.
    @inlinable
    public var isFilled: Bool { attempt.isFilled }

    /// Calls `body` with the result, on `executor`, once the attempt has finished: see
    /// ``Attempt/upon(_:execute:)``.
    ///
    /// - Parameters:
    ///   - executor: Where `body` runs. See ``Executor``.
    ///   - body: Called exactly once with the result.
    @inlinable
    public func upon(_ executor: some Executor, execute body: @escaping @Sendable (Result<Success, Failure>) -> Void) {
        attempt.upon(executor, execute: body)
    }

    /// The result if the attempt has finished, or `nil` at once if it has not:
    /// ``Attempt/peek()``.
    @inlinable
    public func peek() -> Result<Success, Failure>? { attempt.peek() }

    /// Blocks the calling thread until the attempt finishes or `time` passes: see
    /// ``Attempt/wait(until:)``.
    ///
    /// - Parameter time: The latest time to wait until; `.distantFuture` waits indefinitely.
    /// - Returns: The result, or `nil` if `time` passed first.
    @available(*, noasync, message: "wait(until:) blocks the thread; use 'try await attempt.get()'")
    public func wait(until time: DispatchTime) -> Result<Success, Failure>? { attempt.wait(until: time) }
}
