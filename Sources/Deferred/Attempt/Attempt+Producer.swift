extension Attempt {
    /// Creates an attempt and calls `body` at once with the writer that finishes it, for work
    /// that reports its result through a callback and can be stopped.
    ///
    /// ```swift
    /// let download = Attempt<Data, any Error> { writer in
    ///     let request = client.get(url) { result in writer.fill(with: result) }
    ///     writer.onCancel { request.cancel() }
    /// }
    /// ```
    ///
    /// `body` runs once, on the calling thread, before the initializer returns. Cancellation is
    /// visible to it: ``DeferredAttempt/onCancel(_:)`` and ``DeferredAttempt/isCancelled``. A
    /// cancellation fails the attempt at once with its failure type's cancellation error
    /// (`.cancelled` for a ``CancellableError``, `CancellationError` for `any Error`); for any
    /// other failure type, make a ``DeferredAttempt`` with
    /// ``DeferredAttempt/init(cancellationError:file:line:)`` and return its ``DeferredAttempt/attempt``.
    ///
    /// It is for work that reports through a callback. To go on from another attempt, use
    /// ``map(upon:transform:)-(_,(Success)->NewSuccess)`` or
    /// ``andThen(upon:start:)-(_,(Success)->Attempt<NewSuccess,Failure>)``, which also pass
    /// cancellation and demand on; a chain of producers that fill from each other's handlers is
    /// filled, abandoned and released recursively, a few stack frames per link.
    ///
    /// `body` takes the writer: if it neither finishes the attempt nor keeps the writer (in a
    /// closure or an object) before it returns, nothing can finish the attempt any more, and it
    /// fails as abandoned (see ``AbandonedError``).
    ///
    /// - Parameters:
    ///   - file: Where the attempt is made, for ``AbandonedError``; leave the default.
    ///   - line: The line where the attempt is made; leave the default.
    ///   - body: Starts the work, and finishes the writer when it is done.
    public init(
        file: StaticString = #fileID, line: UInt = #line,
        _ body: (_ writer: consuming DeferredAttempt<Success, Failure>) -> Void
    ) {
        let writer = DeferredAttempt<Success, Failure>(file: file, line: line)
        self = writer.attempt
        body(writer)
    }

    /// Creates an attempt that finishes with `result` once `delay` has passed.
    ///
    /// ```swift
    /// let stub = Attempt<User, APIError>(filledWith: .success(.preview), after: .milliseconds(300), upon: DispatchQueue.global())
    /// ```
    ///
    /// It is `Attempt(filledWith: result).delay(by: delay, upon: executor)`: cancelling it
    /// before then fails it at once and lets the timer keep nothing.
    ///
    /// - Parameters:
    ///   - result: The success or failure every reader sees.
    ///   - delay: How long to wait first.
    ///   - executor: The executor that measures the delay and finishes the attempt.
    public init(
        filledWith result: Result<Success, Failure>, after delay: Duration, upon executor: some SchedulingExecutor
    ) {
        self = Attempt(node: AttemptNode(finished: result, cancellation: nil)).delay(by: delay, upon: executor)
    }
}
