public import Dispatch

/// Work that may fail or be called off: a read-only future of a `Result` that its consumer can
/// cancel.
///
/// A service hands out an `Attempt` and keeps the ``DeferredAttempt`` that completes it. The
/// consumer handles success and failure, derives further attempts, awaits it, or cancels it when
/// the result is no longer wanted:
///
/// ```swift
/// let search: Attempt<[String], SearchError> = service.search("swi")
/// search.uponSuccess(.main) { show($0) }
/// // The user typed another letter:
/// search.cancel()  // the results of "swi" will never be shown
/// ```
///
/// Its value is `Result<Success, Failure>`, so every core future API works on it (`upon`,
/// `lazy.map`, `allFilled`, `await value`) and sees the result as it was decided. The failure may
/// be any error: `any Error`, your own typed error, or one from a framework.
///
/// Cancelling (see ``cancel()``):
/// - runs the producer's cancel handlers (``DeferredAttempt/onCancel(_:)``) exactly once, if
///   the attempt had not finished, whether or not the producer kept its `DeferredAttempt`;
/// - fails a pending attempt with its cancellation error at once (`.cancelled` for a
///   ``CancellableError``, `CancellationError` for `any Error`, or the error given to
///   ``DeferredAttempt/init(cancellationError:file:line:)``), and every attempt derived from it with it;
/// - stops the steps of this attempt that have not started, and cancels the attempts it waits
///   for unless something else needs them;
/// - withdraws its success and failure callbacks that have not started, even if it had
///   already finished.
///
/// The name avoids `Task`, `Job` and `Operation`, which Swift and Foundation already use.
public struct Attempt<Success: Sendable, Failure: Error>: FutureProtocol {
    /// An attempt's value: its success or its failure.
    public typealias Value = Result<Success, Failure>

    @usableFromInline
    internal let node: AttemptNode<Success, Failure>

    @inlinable
    internal init(node: AttemptNode<Success, Failure>) {
        self.node = node
    }

    /// Creates an attempt that has already finished with `result`.
    ///
    /// - Parameters:
    ///   - result: The success or failure every reader sees.
    ///   - file: Where the attempt is made, for ``PendingFutures``; leave the default.
    ///   - line: The line where the attempt is made; leave the default.
    @_disfavoredOverload  // `Attempt { ... }` means the initializers that run work.
    @inlinable
    public init(filledWith result: Result<Success, Failure>, file: StaticString = #fileID, line: UInt = #line) {
        node = AttemptNode(finished: result, cancellation: nil)
        if PendingFutures.isRecording {
            PendingFutures.recordAttempt(node, file: file, line: line)
        }
    }

    /// Creates an attempt that has already succeeded.
    ///
    /// - Parameters:
    ///   - success: The value every reader sees.
    ///   - file: Where the attempt is made, for ``PendingFutures``; leave the default.
    ///   - line: The line where the attempt is made; leave the default.
    @inlinable
    public init(succeededWith success: Success, file: StaticString = #fileID, line: UInt = #line) {
        self.init(filledWith: .success(success), file: file, line: line)
    }

    /// Creates an attempt that has already failed.
    ///
    /// - Parameters:
    ///   - failure: The error every reader sees.
    ///   - file: Where the attempt is made, for ``PendingFutures``; leave the default.
    ///   - line: The line where the attempt is made; leave the default.
    @inlinable
    public init(failedWith failure: Failure, file: StaticString = #fileID, line: UInt = #line) {
        self.init(filledWith: .failure(failure), file: file, line: line)
    }

    /// Creates an attempt that has already finished with `result`.
    @_documentation(visibility: internal)
    @available(*, deprecated, renamed: "init(filledWith:)")
    @_disfavoredOverload
    @inlinable
    public init(result: Result<Success, Failure>) {
        self.init(filledWith: result)
    }

    /// Creates an attempt that has already succeeded.
    @_documentation(visibility: internal)
    @available(*, deprecated, renamed: "init(succeededWith:)")
    @inlinable
    public init(success: Success) {
        self.init(succeededWith: success)
    }

    /// Creates an attempt that has already failed.
    @_documentation(visibility: internal)
    @available(*, deprecated, renamed: "init(failedWith:)")
    @inlinable
    public init(failure: Failure) {
        self.init(failedWith: failure)
    }

    /// Calls `body` with the result, on `executor`, once the attempt has finished.
    ///
    /// The handler sees the result as it was decided, and runs even if the attempt is cancelled
    /// afterwards; use ``uponSuccess(_:execute:)-(Executor,_)`` and ``uponFailure(_:execute:)-(Executor,_)`` for callbacks
    /// that a cancellation withdraws. A handler needs the attempt for good: the attempt is no
    /// longer cancelled when the attempts derived from it give up (``cancel()`` still cancels
    /// it).
    ///
    /// - Parameters:
    ///   - executor: Where `body` runs. See ``Executor``.
    ///   - body: Called exactly once with the result.
    @inlinable
    public func upon(_ executor: some Executor, execute body: @escaping @Sendable (Result<Success, Failure>) -> Void) {
        node.pin()
        node.upon(executor, execute: body)
    }

    /// Returns the result if the attempt has finished, or `nil` at once if it has not.
    @inlinable
    public func peek() -> Result<Success, Failure>? {
        let result = node.peek()
        if result != nil, node.isTraced {
            node.traceObserved()
        }
        return result
    }

    /// Blocks the calling thread until the attempt finishes or `time` passes.
    ///
    /// While it waits, the attempt counts as needed, so it is not cancelled for lack of demand;
    /// a wait that times out does not cancel the work (unless something that needed it gave up
    /// while it waited).
    ///
    /// - Parameter time: The latest time to wait until; `.distantFuture` waits indefinitely.
    /// - Returns: The result, or `nil` if `time` passed first.
    @available(*, noasync, message: "wait(until:) blocks the thread; use 'try await attempt.get()'")
    public func wait(until time: DispatchTime) -> Result<Success, Failure>? {
        if let result = peek() {
            return result
        }
        guard node.takeUnit() else {
            return node.wait(until: time)
        }
        // A wait that ends, by a result or a timeout, gives its unit back as a reader.
        defer { DemandUnit(node).release(givingBack: true) }
        return node.wait(until: time)
    }

    /// Whether the attempt has finished.
    @inlinable
    public var isFilled: Bool {
        node.peek() != nil
    }

    /// Whether the attempt was cancelled: by ``cancel()``, because an attempt it depends on was
    /// cancelled, or because nothing needed it any more.
    ///
    /// Once this is `true`, ``peek()`` returns the result, except for a failure type with no
    /// cancellation error: there ``cancel()`` tells the producer to stop, but the producer's own
    /// result still decides the attempt.
    @inlinable
    public var isCancelled: Bool {
        node.isCancelled
    }

    /// Cancels the attempt.
    ///
    /// If the attempt has not finished, it fails with its cancellation error, and so does every
    /// attempt derived from it; the producer's cancel handlers run once; its steps that have not
    /// started never run; and the attempts it waits for are cancelled unless something else
    /// needs them.
    ///
    /// In any case, its success and failure callbacks that have not started when this returns
    /// never run, so a result that arrived a moment ago is not delivered either. The decided
    /// result itself never changes: ``peek()``, ``upon(_:execute:)``, `await value` and `get()`
    /// still see it.
    ///
    /// An attempt whose failure type has no cancellation error (neither a ``CancellableError``
    /// nor `any Error`, and none given to ``DeferredAttempt/init(cancellationError:file:line:)``) cannot
    /// fail by cancellation: cancelling it withdraws its callbacks and stops what it waits for,
    /// and it finishes when its producer fills it. Its derived attempts then finish from that
    /// result as if nothing had been cancelled, their steps included, since they have no error
    /// to fail with instead; give such a type a cancellation error where steps must not run.
    public func cancel() {
        node.cancel()
    }
}

extension Attempt where Failure == any Error {
    /// Creates an attempt that has already succeeded, whose failure type is `any Error`.
    ///
    /// This lets `Attempt(succeededWith: 3)` stand on its own; give the type
    /// (`Attempt<Int, MyError>(succeededWith: 3)`) for a typed failure. It is the same
    /// initializer as ``Attempt/init(succeededWith:file:line:)``, so the documentation shows that one.
    ///
    /// - Parameter success: The value every reader sees.
    @_documentation(visibility: internal)
    @_disfavoredOverload
    @inlinable
    public init(succeededWith success: Success) {
        self.init(filledWith: .success(success))
    }
}

extension Attempt: FutureView {
    /// An attempt read as a future of its result: the link is added to its node like a
    /// handler of ``Attempt/upon(_:execute:)``, which it counts as.
    @usableFromInline
    internal func addLinkThroughView<Linked>(
        _ node: ChainNode,
        in queue: inout DrainQueue,
        _ step: @escaping @Sendable (ChainNode, Linked, inout DrainQueue) -> Void
    ) {
        self.node.pin()
        self.node.add(.link(node) { node, result, queue in step(node, result as! Linked, &queue) }, in: &queue)
    }
}
