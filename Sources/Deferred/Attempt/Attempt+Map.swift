extension Attempt {
    /// Returns an attempt that succeeds with `transform` applied to this attempt's value, or
    /// fails with this attempt's error or the error `transform` throws.
    ///
    /// ```swift
    /// let names = fetchUsers().map(upon: .global()) { users in
    ///     guard !users.isEmpty else { throw APIError.empty }
    ///     return users.map(\.name)
    /// }
    /// ```
    ///
    /// `transform` runs once, on `executor`, when this attempt succeeds; it never runs if the new
    /// attempt has been cancelled (or nothing needs it any more) by then. Cancelling the new
    /// attempt cancels this one unless something else needs it; a cancellation of this one
    /// passes through.
    ///
    /// - Parameters:
    ///   - executor: Where `transform` runs. See ``Executor``.
    ///   - transform: Makes the new value, or throws a failure.
    /// - Returns: An attempt of the transformed value.
    @_disfavoredOverload  // A closure that cannot throw takes the overload below.
    @inlinable
    public func map<NewSuccess: Sendable>(
        upon executor: some Executor,
        transform: @escaping @Sendable (Success) throws(Failure) -> NewSuccess
    ) -> Attempt<NewSuccess, Failure> {
        derive(
            OnSuccessStep<Success, NewSuccess, NewSuccess, Failure>.self, upon: executor, body: transform,
            cancellation: node.cancellation)
    }

    /// Returns an attempt that succeeds with `transform` applied to this attempt's value, or
    /// fails with this attempt's error; see `map(upon:transform:)` with a closure that throws.
    ///
    /// This overload takes a transform that cannot throw, so that the failure type comes from
    /// this attempt, not from the closure: a chain after ``mapError(upon:transform:)`` type-checks
    /// as written.
    ///
    /// - Parameters:
    ///   - executor: Where `transform` runs. See ``Executor``.
    ///   - transform: Makes the new value.
    /// - Returns: An attempt of the transformed value.
    @inlinable
    public func map<NewSuccess: Sendable>(
        upon executor: some Executor,
        transform: @escaping @Sendable (Success) -> NewSuccess
    ) -> Attempt<NewSuccess, Failure> {
        let body: @Sendable (Success) throws(Failure) -> NewSuccess = transform
        return map(upon: executor, transform: body)
    }

    /// Returns an attempt that fails with `transform` applied to this attempt's error, or
    /// succeeds with this attempt's value.
    ///
    /// Use it to translate a lower layer's errors into your own:
    ///
    /// ```swift
    /// let profile = api.profile(id).mapError(upon: .immediate) { ProfileError(underlying: $0) }
    /// ```
    ///
    /// `transform` runs once, on `executor`, when this attempt fails, and never otherwise: not on
    /// a success, and not for a cancellation of the new attempt, which fails at once with its own
    /// cancellation error (`.cancelled` for a ``CancellableError``, `CancellationError` for
    /// `any Error`); a cancellation of this attempt passes through the same way.
    ///
    /// A failure type with neither has no error to fail with at the moment of a cancellation:
    /// give one with ``mapError(upon:cancellingWith:transform:)``. Without it, cancelling the new
    /// attempt withdraws its callbacks and stops the work above it, and the new attempt then
    /// fails, as cancelled, with `transform` of this attempt's cancellation error, on `executor`
    /// like any failure (if this attempt cannot fail by cancellation either, it finishes when its
    /// producer does).
    ///
    /// - Parameters:
    ///   - executor: Where `transform` runs. See ``Executor``.
    ///   - transform: Makes the new error.
    /// - Returns: An attempt with the new failure type.
    @inlinable
    public func mapError<NewFailure: Error>(
        upon executor: some Executor,
        transform: @escaping @Sendable (Failure) -> NewFailure
    ) -> Attempt<Success, NewFailure> {
        mapError(upon: executor, cancellation: nil, transform: transform)
    }

    /// Returns an attempt that fails with `transform` applied to this attempt's error, or
    /// succeeds with this attempt's value, and with `cancellationError` when it is cancelled.
    ///
    /// Use it when the new failure type has no cancellation error of its own (it is neither a
    /// ``CancellableError`` nor `any Error`):
    ///
    /// ```swift
    /// enum ProfileError: Error { case unreachable, wrapped(APIError) }
    /// let profile = api.profile(id).mapError(upon: .immediate, cancellingWith: .unreachable) {
    ///     .wrapped($0)
    /// }
    /// ```
    ///
    /// `transform` runs once, on `executor`, when this attempt fails, and never otherwise. A
    /// cancellation, of this attempt or of the new one, fails the new attempt at once with
    /// `cancellationError`, and so do the attempts derived from it that keep its failure type.
    ///
    /// - Parameters:
    ///   - executor: Where `transform` runs. See ``Executor``.
    ///   - cancellationError: The failure of the new attempt when it is cancelled.
    ///   - transform: Makes the new error.
    /// - Returns: An attempt with the new failure type.
    @inlinable
    public func mapError<NewFailure: Error>(
        upon executor: some Executor,
        cancellingWith cancellationError: NewFailure,
        transform: @escaping @Sendable (Failure) -> NewFailure
    ) -> Attempt<Success, NewFailure> {
        mapError(upon: executor, cancellation: CancellationErrorBox(cancellationError), transform: transform)
    }

    /// Derives the attempt of a `mapError` with the given cancellation error source: `nil` for
    /// the new failure type's own, if it has one.
    @inlinable
    internal func mapError<NewFailure: Error>(
        upon executor: some Executor,
        cancellation: CancellationErrorBox<NewFailure>?,
        transform: @escaping @Sendable (Failure) -> NewFailure
    ) -> Attempt<Success, NewFailure> {
        typealias Step = MapErrorStep<Success, Failure, NewFailure>
        // Converted here, where the types are concrete: generic inference in `derive` will not
        // widen a non-throwing closure to `throws(NewFailure)`.
        let body: Step.Body = transform
        return derive(Step.self, upon: executor, body: body, cancellation: cancellation)
    }

    /// Returns an attempt that succeeds with this attempt's value, or with the value
    /// `recovery` makes from its error.
    ///
    /// ```swift
    /// let settings = loadSettings().recover(upon: .immediate) { _ in .defaults }
    /// ```
    ///
    /// A cancellation is not a failure to recover from: it passes through, and `recovery` does
    /// not run.
    ///
    /// - Parameters:
    ///   - executor: Where `recovery` runs. See ``Executor``.
    ///   - recovery: Makes a value from the error, or throws a failure.
    /// - Returns: An attempt that fails only if `recovery` throws, or is cancelled.
    @_disfavoredOverload  // A closure that cannot throw takes the overload below.
    @inlinable
    public func recover(
        upon executor: some Executor,
        substituting recovery: @escaping @Sendable (Failure) throws(Failure) -> Success
    ) -> Attempt<Success, Failure> {
        derive(
            OnFailureStep<Success, Success, Failure>.self, upon: executor, body: recovery,
            cancellation: node.cancellation)
    }

    /// Returns an attempt that succeeds with this attempt's value, or with the value `recovery`
    /// makes from its error; see
    /// `recover(upon:substituting:)` with a closure that throws.
    ///
    /// This overload takes a `recovery` that cannot throw, so that the failure type comes from
    /// this attempt, not from the closure.
    ///
    /// - Parameters:
    ///   - executor: Where `recovery` runs. See ``Executor``.
    ///   - recovery: Makes a value from the error.
    /// - Returns: An attempt that fails only if it is cancelled.
    @inlinable
    public func recover(
        upon executor: some Executor,
        substituting recovery: @escaping @Sendable (Failure) -> Success
    ) -> Attempt<Success, Failure> {
        let body: @Sendable (Failure) throws(Failure) -> Success = recovery
        return recover(upon: executor, substituting: body)
    }

}

/// What a derived attempt computes from its source's result, once: the step of a `map`,
/// `mapError`, `recover`, `andThen` or `fallback`.
///
/// A step is a caseless type naming what its node does: the node stores the user's closure
/// (``Body``) and calls the step's static functions, which are direct and specialized where the
/// combinator is, so a stage costs one allocation. The node decides whether the step runs; the
/// step only says what it does with an input.
///
/// The requirements ask separately whether the step runs and what passes on, so that a node's
/// common path makes no `Result` or `Optional` of its own: unoptimized, a function looks up the
/// metadata of every such local on entry, whichever branch it takes.
@usableFromInline
internal protocol AttemptStep: Sendable {
    /// The source's value.
    associatedtype Input: Sendable
    /// The source's error.
    associatedtype InputFailure: Error
    /// The derived attempt's value.
    associatedtype Success: Sendable
    /// The derived attempt's error.
    associatedtype Failure: Error
    /// What the step makes: the value itself, or an attempt that will finish with it.
    associatedtype Output
    /// What the user's closure takes: the source's value, or its error.
    associatedtype Argument
    /// What the user's closure returns.
    associatedtype Made
    /// What the user's closure throws.
    associatedtype Thrown: Error

    /// Whether the step runs for `input`; otherwise ``passedOn(_:)`` is the result.
    static func runs(for input: Result<Input, InputFailure>) -> Bool

    /// The result to pass on, without running the step, for an input it does not run for.
    static func passedOn(_ input: Result<Input, InputFailure>) -> Result<Success, Failure>

    /// How a dump of pending chains names the stage (see ``PendingFutures``).
    static var traceName: String { get }

    /// The failure a cancelled source's `input` becomes here, given the derived attempt's own
    /// cancellation error.
    static func cancellation(of input: Result<Input, InputFailure>, ownError: Failure?) -> Failure?

    /// Runs `body` on an input that ``passedOn(_:)`` did not pass on.
    static func run(_ body: Body, on input: Result<Input, InputFailure>) -> Result<Output, Failure>
}

extension AttemptStep {
    /// The user's closure, as a node stores it.
    ///
    /// A function type has the same layout whatever its parameters, so a node's unspecialized
    /// deinit destroys a `Body?` without looking up any metadata (it would for a `Step?`).
    @usableFromInline internal typealias Body = @Sendable (Argument) throws(Thrown) -> Made
}

extension AttemptStep where InputFailure == Failure {
    /// A cancelled source's result, whatever it was, becomes this attempt's cancellation error;
    /// without one, a cancelled source's failure passes on as it is.
    @inlinable
    internal static func cancellation(of input: Result<Input, InputFailure>, ownError: Failure?) -> Failure? {
        ownError ?? input.failure
    }
}

/// The step of `map` and `andThen`: runs on a success and passes a failure on.
@usableFromInline
internal enum OnSuccessStep<Input: Sendable, Success: Sendable, Output, Failure: Error>: AttemptStep {
    @usableFromInline
    internal static var traceName: String {
        Output.self == Success.self ? "map" : "andThen"
    }

    @usableFromInline internal typealias InputFailure = Failure
    @usableFromInline internal typealias Argument = Input
    @usableFromInline internal typealias Made = Output
    @usableFromInline internal typealias Thrown = Failure

    @inlinable
    internal static func runs(for input: Result<Input, Failure>) -> Bool {
        if case .success = input { true } else { false }
    }

    @inlinable
    internal static func passedOn(_ input: Result<Input, Failure>) -> Result<Success, Failure> {
        .failure(input.failureUnchecked)
    }

    @inlinable
    internal static func run(_ body: Body, on input: Result<Input, Failure>) -> Result<Output, Failure> {
        Result { () throws(Failure) in try body(input.successValueUnchecked) }
    }
}

/// The step of `recover` and `fallback`: runs on a failure and passes a success on.
@usableFromInline
internal enum OnFailureStep<Success: Sendable, Output, Failure: Error>: AttemptStep {
    @usableFromInline
    internal static var traceName: String {
        "recover"
    }

    @usableFromInline internal typealias Input = Success
    @usableFromInline internal typealias InputFailure = Failure
    @usableFromInline internal typealias Argument = Failure
    @usableFromInline internal typealias Made = Output
    @usableFromInline internal typealias Thrown = Failure

    @inlinable
    internal static func runs(for input: Result<Success, Failure>) -> Bool {
        if case .failure = input { true } else { false }
    }

    @inlinable
    internal static func passedOn(_ input: Result<Success, Failure>) -> Result<Success, Failure> {
        input
    }

    @inlinable
    internal static func run(_ body: Body, on input: Result<Success, Failure>) -> Result<Output, Failure> {
        Result { () throws(Failure) in try body(input.failureUnchecked) }
    }
}

/// The step of `mapError`: makes a new error from a failure that is not a cancellation.
@usableFromInline
internal enum MapErrorStep<Success: Sendable, InputFailure: Error, Failure: Error>: AttemptStep {
    @usableFromInline
    internal static var traceName: String {
        "mapError"
    }

    @usableFromInline internal typealias Input = Success
    @usableFromInline internal typealias Output = Success
    @usableFromInline internal typealias Argument = InputFailure
    @usableFromInline internal typealias Made = Failure

    /// Typed as throwing only to share ``AttemptStep/Body``'s shape (the transform never
    /// throws): Swift 6.3 crashes emitting a `throws(Never)` witness for it.
    @usableFromInline internal typealias Thrown = Failure

    @inlinable
    internal static func runs(for input: Result<Success, InputFailure>) -> Bool {
        if case .failure = input { true } else { false }
    }

    @inlinable
    internal static func passedOn(_ input: Result<Success, InputFailure>) -> Result<Success, Failure> {
        .success(input.successValueUnchecked)
    }

    /// A cancellation becomes this attempt's own cancellation error: the source's error has
    /// another type.
    @inlinable
    internal static func cancellation(of input: Result<Success, InputFailure>, ownError: Failure?) -> Failure? {
        ownError
    }

    @inlinable
    internal static func run(_ body: Body, on input: Result<Success, InputFailure>) -> Result<Success, Failure> {
        do throws(Failure) {
            return .failure(try body(input.failureUnchecked))
        } catch {
            return .failure(error)
        }
    }
}
