/// An error type that can report that a deadline passed before the work finished.
///
/// An attempt whose failure type conforms fails with `.deadlinePassed` when its
/// ``Attempt/deadline(at:)`` passes, so that callers tell a late result from a cancellation:
///
/// ```swift
/// enum LookupError: ExpirableError, CancellableError {
///     case notFound
///     case cancelled
///     case deadlinePassed
/// }
/// ```
///
/// Without it, a typed failure reports a passed deadline with its cancellation error (as
/// ``CancellableError`` or the writer's `cancellationError:` says); `any Error` reports it with
/// ``DeadlineError``, which conforms.
public protocol ExpirableError: Error {
    /// The error of work whose deadline passed before it finished.
    static var deadlinePassed: Self { get }
}

extension DeadlineError: ExpirableError {
    /// A `DeadlineError`.
    public static var deadlinePassed: DeadlineError {
        DeadlineError()
    }
}
