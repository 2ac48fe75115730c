/// An error type that can report that work was cancelled.
///
/// The failure type of an ``Attempt`` conforms to it, so that a cancelled attempt can fail
/// with a typed error that callers handle like any other:
///
/// ```swift
/// enum SearchError: CancellableError {
///     case offline
///     case cancelled
/// }
/// ```
///
/// `CancellationError` conforms, for attempts that fail only by being cancelled.
public protocol CancellableError: Error {
    /// The error that reports cancelled work.
    static var cancelled: Self { get }
}

/// Swift's `CancellationError` is a cancellable error, for work that fails only by being
/// cancelled.
extension CancellationError: CancellableError {
    /// A `CancellationError`.
    public static var cancelled: CancellationError {
        CancellationError()
    }
}
