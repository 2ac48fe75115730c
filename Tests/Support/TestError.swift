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
