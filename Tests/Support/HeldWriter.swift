public import Deferred

/// A writer kept in an object, for tests that hold many in an array or hand one to another
/// thread: releasing the last reference to it releases the writer (which fails a pending
/// attempt of an abandonable failure type as abandoned).
public final class HeldWriter<Success: Sendable, Failure: Error>: Sendable {
    /// The writer.
    public let writer: DeferredAttempt<Success, Failure>

    /// Holds a new writer.
    public init(file: StaticString = #fileID, line: UInt = #line) {
        writer = DeferredAttempt(file: file, line: line)
    }

    /// Holds `writer`.
    public init(_ writer: consuming DeferredAttempt<Success, Failure>) {
        self.writer = writer
    }

    /// The attempt the writer finishes.
    public var attempt: Attempt<Success, Failure> { writer.attempt }

    /// Whether the attempt was cancelled.
    public var isCancelled: Bool { writer.isCancelled }

    /// Whether the attempt has finished.
    public var isFilled: Bool { writer.isFilled }

    /// See ``DeferredAttempt/succeed(with:)``.
    @discardableResult
    public func succeed(with value: Success) -> Bool { writer.succeed(with: value) }

    /// See ``DeferredAttempt/fail(with:)``.
    @discardableResult
    public func fail(with error: Failure) -> Bool { writer.fail(with: error) }

    /// See ``DeferredAttempt/fill(with:)``.
    @discardableResult
    public func fill(with result: Result<Success, Failure>) -> Bool { writer.fill(with: result) }

    /// See ``DeferredAttempt/onCancel(_:)``.
    public func onCancel(_ handler: @escaping @Sendable () -> Void) { writer.onCancel(handler) }

    /// The result, if the attempt has finished.
    public func peek() -> Result<Success, Failure>? { writer.peek() }
}
