public import Deferred

/// A typed failure for attempt tests.
public enum TestError: CancellableError, Equatable {
    /// Work failed with a code.
    case failed(Int)
    /// Work was cancelled.
    case cancelled
    /// Work took too long.
    case timedOut
}

/// A failure type other than ``TestError``, for attempts that change their failure type.
public enum WrappedTestError: CancellableError, Equatable {
    /// A test error, wrapped.
    case wrapped(TestError)
    /// Work was cancelled.
    case cancelled

    /// The test error this wraps; a cancellation becomes ``TestError/cancelled``.
    public var unwrapped: TestError {
        if case .wrapped(let error) = self { error } else { .cancelled }
    }
}

extension Result {
    /// The error, if this is a failure.
    public var failureValue: Failure? {
        if case .failure(let error) = self { error } else { nil }
    }
}

extension Result {
    /// The value, if this is a success.
    public var successValue: Success? {
        if case .success(let value) = self { value } else { nil }
    }
}

/// The ``TestError`` a task failed with, if it failed with one.
public func failure<Success>(of task: Task<Success, any Error>) async -> TestError? {
    if case .failure(let error) = await task.result {
        return error as? TestError
    }
    return nil
}
