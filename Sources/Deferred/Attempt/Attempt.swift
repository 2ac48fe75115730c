public import Dispatch

/// Work that may fail or be called off: a read-only future of a `Result` with a typed failure,
/// that its consumer can cancel.
///
/// A service hands out an `Attempt` and keeps the ``DeferredAttempt`` that completes it. The
/// consumer handles success and failure, derives further attempts, awaits it with typed
/// throws, or cancels it when the result is no longer wanted:
///
/// ```swift
/// let search: Attempt<[String], SearchError> = service.search("swi")
/// search.uponSuccess(.main) { show($0) }
/// search.uponFailure(.main) { showError($0) }
/// // The user typed another letter:
/// search.cancel()
/// ```
///
/// Its value is `Result<Success, Failure>`, so every core future API works on it: `upon`,
/// `every`, `allFilled`, `ignored`, `await value`. Cancelling runs what the producer registered
/// with ``DeferredAttempt/onCancel(_:)``, exactly once, and fails the attempt with
/// `Failure.cancelled`; cancelling a finished attempt does nothing. Cancelling an attempt
/// derived with `map`, `andThen`, `allSucceeded` and the like cancels the attempts it depends
/// on, unless something else still needs them.
///
/// The name avoids `Task`, `Job` and `Operation`, which Swift and Foundation already use.
public struct Attempt<Success: Sendable, Failure: CancellableError>: FutureProtocol {
    /// An attempt's value: its success or its failure.
    public typealias Value = Result<Success, Failure>

    @usableFromInline
    internal enum Source: Sendable {
        case pending(AttemptControl<Success, Failure>)
        case finished(Result<Success, Failure>)
    }

    @usableFromInline
    internal let source: Source

    @inlinable
    internal init(_ control: AttemptControl<Success, Failure>) {
        source = .pending(control)
    }

    /// Creates an attempt that has already finished with `result`.
    ///
    /// - Parameter result: The success or failure every reader sees.
    @inlinable
    public init(result: Result<Success, Failure>) {
        source = .finished(result)
    }

    /// Creates an attempt that has already succeeded.
    ///
    /// - Parameter success: The value every reader sees.
    @_disfavoredOverload  // `Attempt { try await work() }` means the async initializer.
    @inlinable
    public init(success: Success) {
        self.init(result: .success(success))
    }

    /// Creates an attempt that has already failed.
    ///
    /// - Parameter failure: The error every reader sees.
    @inlinable
    public init(failure: Failure) {
        self.init(result: .failure(failure))
    }

    /// Calls `body` with the result, on `executor`, once the attempt has finished.
    ///
    /// A handler counts as needing the attempt for good: the attempt is no longer cancelled
    /// when attempts derived from it give up (it can still be cancelled with ``cancel()``).
    ///
    /// - Parameters:
    ///   - executor: Where `body` runs. See ``Executor``.
    ///   - body: Called exactly once with the result.
    public func upon(_ executor: some Executor, execute body: @escaping @Sendable (Result<Success, Failure>) -> Void) {
        switch source {
        case .pending(let control):
            control.addPermanentDemand()
            control.result.upon(executor, execute: body)
        case .finished(let result):
            Future(value: result).upon(executor, execute: body)
        }
    }

    /// Returns the result if the attempt has finished, or `nil` at once if it has not.
    public func peek() -> Result<Success, Failure>? {
        switch source {
        case .pending(let control): control.result.peek()
        case .finished(let result): result
        }
    }

    /// Blocks the calling thread until the attempt finishes or `time` passes.
    ///
    /// - Parameter time: The latest time to wait until; `.distantFuture` waits indefinitely.
    /// - Returns: The result, or `nil` if `time` passed first.
    @available(*, noasync, message: "wait(until:) blocks the thread; use 'try await attempt.get()'")
    public func wait(until time: DispatchTime) -> Result<Success, Failure>? {
        switch source {
        case .pending(let control): control.result.wait(until: time)
        case .finished(let result): result
        }
    }

    /// Whether the attempt has finished.
    public var isFilled: Bool {
        peek() != nil
    }

    /// Whether the attempt was cancelled.
    public var isCancelled: Bool {
        if case .pending(let control) = source {
            control.isCancelled
        } else {
            false
        }
    }

    /// Cancels the attempt unless it has finished.
    ///
    /// The attempt fails with `Failure.cancelled`; the producer's cancel handlers run, once;
    /// attempts derived from this one fail with the same error, and attempts this one depends on
    /// are cancelled unless something else needs them.
    public func cancel() {
        if case .pending(let control) = source {
            control.cancel()
        }
    }

    /// The control of a pending attempt, or `nil` for one that was made finished.
    @usableFromInline
    internal var control: AttemptControl<Success, Failure>? {
        if case .pending(let control) = source {
            control
        } else {
            nil
        }
    }

    /// The result as a plain future, without recording demand.
    @usableFromInline
    internal var result: Future<Result<Success, Failure>> {
        switch source {
        case .pending(let control): Future(control.result)
        case .finished(let result): Future(value: result)
        }
    }

    /// Makes an attempt that continues this one.
    ///
    /// `step` runs on `executor` with this attempt's result and the new attempt's control,
    /// unless the new attempt has finished (been cancelled) by then. The new attempt needs this
    /// one until it finishes, and holds it only weakly, so neither keeps the other alive.
    @usableFromInline
    internal func derive<NewSuccess, NewFailure>(
        upon executor: some Executor,
        _ step: @escaping @Sendable (Result<Success, Failure>, AttemptControl<NewSuccess, NewFailure>) -> Void
    ) -> Attempt<NewSuccess, NewFailure> {
        let derived = AttemptControl<NewSuccess, NewFailure>()
        control?.addDemand(until: derived)
        result.upon(executor) { result in
            if !derived.isFinished {
                step(result, derived)
            }
        }
        return Attempt<NewSuccess, NewFailure>(derived)
    }
}

extension AttemptControl {
    /// Finishes this attempt with `attempt`'s result, needing `attempt` until then.
    @usableFromInline
    internal func follow(_ attempt: Attempt<Success, Failure>) {
        attempt.control?.addDemand(until: self)
        attempt.result.upon(ImmediateExecutor.shared) { [self] result in
            complete(with: result)
        }
    }
}

/// The writing side of an ``Attempt``: complete it with a success or a failure, and learn when
/// its consumer cancels it.
///
/// Keep it with the work and hand out ``attempt``:
///
/// ```swift
/// func download(_ url: URL) -> Attempt<Data, DownloadError> {
///     let download = DeferredAttempt<Data, DownloadError>()
///     let request = client.get(url) { result in download.fill(with: result) }
///     download.onCancel { request.cancel() }
///     return download.attempt
/// }
/// ```
///
/// The first of completing and cancelling wins; whatever comes later changes nothing.
public struct DeferredAttempt<Success: Sendable, Failure: CancellableError>: FutureProtocol, PromiseProtocol {
    /// An attempt's value: its success or its failure.
    public typealias Value = Result<Success, Failure>

    @usableFromInline
    internal let control: AttemptControl<Success, Failure>

    /// Creates an attempt that has not finished.
    public init() {
        control = AttemptControl()
    }

    /// The read-only attempt that this completes.
    public var attempt: Attempt<Success, Failure> {
        Attempt(control)
    }

    /// Completes the attempt with `result` unless it has finished.
    ///
    /// - Parameter result: The success or failure every reader sees.
    /// - Returns: `true` if this call completed the attempt; `false` if it had finished, for
    ///   instance because it was cancelled.
    @discardableResult
    public func fill(with result: Result<Success, Failure>) -> Bool {
        control.complete(with: result)
    }

    /// Completes the attempt with a success unless it has finished.
    ///
    /// - Parameter value: The value every reader sees.
    /// - Returns: `true` if this call completed the attempt.
    @discardableResult
    public func succeed(with value: Success) -> Bool {
        control.complete(with: .success(value))
    }

    /// Completes the attempt with a failure unless it has finished.
    ///
    /// - Parameter error: The error every reader sees.
    /// - Returns: `true` if this call completed the attempt.
    @discardableResult
    public func fail(with error: Failure) -> Bool {
        control.complete(with: .failure(error))
    }

    /// Registers what cancelling means: `handler` runs once if the attempt is cancelled before
    /// it completes, at once if it already was, and never if it completes first.
    ///
    /// - Parameter handler: Stops the work: cancels a request, closes a file.
    public func onCancel(_ handler: @escaping @Sendable () -> Void) {
        control.onCancel(handler)
    }

    /// Whether the attempt was cancelled.
    ///
    /// Long-running work may check it to stop early.
    public var isCancelled: Bool {
        control.isCancelled
    }

    /// Whether the attempt has finished.
    public var isFilled: Bool {
        control.result.isFilled
    }

    /// Calls `body` with the result, on `executor`, once the attempt has finished.
    ///
    /// - Parameters:
    ///   - executor: Where `body` runs. See ``Executor``.
    ///   - body: Called exactly once with the result.
    public func upon(_ executor: some Executor, execute body: @escaping @Sendable (Result<Success, Failure>) -> Void) {
        attempt.upon(executor, execute: body)
    }

    /// Returns the result if the attempt has finished, or `nil` at once if it has not.
    public func peek() -> Result<Success, Failure>? {
        control.result.peek()
    }

    /// Blocks the calling thread until the attempt finishes or `time` passes.
    ///
    /// - Parameter time: The latest time to wait until; `.distantFuture` waits indefinitely.
    /// - Returns: The result, or `nil` if `time` passed first.
    @available(*, noasync, message: "wait(until:) blocks the thread; use 'try await attempt.get()'")
    public func wait(until time: DispatchTime) -> Result<Success, Failure>? {
        control.result.wait(until: time)
    }
}
