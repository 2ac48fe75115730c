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

/// Where an attempt gets the error it fails with when it is cancelled.
///
/// Most failure types say it themselves: a ``CancellableError`` has `.cancelled`, and `any Error`
/// uses Swift's `CancellationError`. For any other type, the producer gives the error when it
/// makes the ``DeferredAttempt`` (or the caller to `mapError(upon:cancellingWith:transform:)`),
/// and attempts derived from that one inherit it. Attempts that keep the type's own error carry no
/// box at all.
///
/// A box holds the error itself, never a closure or another box, so a chain of any length
/// keeps nothing of the stages above it and is released without recursion.
@usableFromInline
internal typealias CancellationErrorBox<Failure: Error> = ValueBox<Failure>

extension ValueBox where Value: Error {
    /// Whether `error` reads as a cancellation: a `CancellationError`, or the type's own
    /// `cancelled` when the type is `Equatable` (other types cannot be compared).
    @usableFromInline
    internal static func isCancellation(_ error: Value) -> Bool {
        if error is CancellationError {
            return true
        }
        guard let cancelled = cancellationErrorOfType(Value.self), let equatable = error as? any Equatable else {
            return false
        }
        return equals(equatable, cancelled)
    }
}

/// The error that `Failure` itself uses for a cancellation, if it has one.
///
/// Free functions of the failure type rather than members of its box: code that is not
/// specialized (a stop that a release loop carries out) then needs the failure type's metadata
/// alone, which it has, and looks up no box type's.
@inlinable
internal func cancellationErrorOfType<Failure: Error>(_: Failure.Type) -> Failure? {
    if let cancellable = Failure.self as? any CancellableError.Type {
        return cancelledError(of: cancellable)
    }
    if Failure.self == (any Error).self {
        return CancellationError() as any Error as? Failure
    }
    return nil
}

/// `Cancellable.cancelled` as a `Failure`, which it always is: a cast between the two generic
/// types, which specialized code folds away (through `any Error` it boxed the error and cast it
/// at run time on every cancellation).
@inlinable
internal func cancelledError<Cancellable: CancellableError, Failure: Error>(of _: Cancellable.Type) -> Failure? {
    Cancellable.cancelled as? Failure
}

/// Whether `Failure` says itself how a cancellation fails; folded away where it is known (see
/// ``cancellationErrorOfType(_:)``).
@inlinable
internal func hasCancellationErrorOfType<Failure: Error>(_: Failure.Type) -> Bool {
    Failure.self is any CancellableError.Type || Failure.self == (any Error).self
}

/// Whether `other` is a value of `lhs`'s type equal to it.
private func equals<Value: Equatable>(_ lhs: Value, _ other: some Any) -> Bool {
    (other as? Value) == lhs
}

extension Optional {
    /// Whether an attempt with this box cannot fail by cancellation: no error given, and
    /// none of the failure type's own.
    @inlinable
    internal func hasNoCancellationError<Failure>() -> Bool where Wrapped == CancellationErrorBox<Failure> {
        guard case .none = self else {
            return false
        }
        return !hasCancellationErrorOfType(Failure.self)
    }

    /// The cancellation error from this box, or the failure type's own.
    @inlinable
    internal func cancellationError<Failure>() -> Failure? where Wrapped == CancellationErrorBox<Failure> {
        guard case .some(let box) = self else {
            return cancellationErrorOfType(Failure.self)
        }
        return box.value
    }
}
