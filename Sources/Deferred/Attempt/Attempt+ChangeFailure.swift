extension Attempt {
    /// Returns an attempt that succeeds with this attempt's value, or continues with an attempt
    /// of another failure type that `start` makes from its error.
    ///
    /// ```swift
    /// let page: Attempt<Page, UIError> = cache.page(id).fallback(upon: .immediate) { _ in
    ///     api.page(id).mapError(upon: .immediate) { UIError(reason: $0) }
    /// }
    /// ```
    ///
    /// Where ``fallback(upon:to:)-(_,(Failure)->Attempt<Success,Failure>)`` keeps the failure
    /// type, this one changes it: a failure of this attempt can only go on as the fallback's
    /// result. A cancellation does not run `start`: the new attempt fails with
    /// `NewFailure.cancelled`. Cancelling the new attempt cancels whichever attempt it is waiting
    /// for, unless something else needs it.
    ///
    /// The new failure type says how a cancellation fails, so that a cancellation never reaches
    /// `start` as an error to fall back from: it is a ``CancellableError`` here, and `any Error`
    /// in the overload that returns an `Attempt<Success, any Error>`.
    ///
    /// - Parameters:
    ///   - executor: Where `start` runs. See ``Executor``.
    ///   - start: Starts another attempt from the error.
    /// - Returns: An attempt of this attempt's value or the fallback's result.
    @_disfavoredOverload  // A closure whose attempt could keep this failure type keeps it.
    public func fallback<NewFailure: CancellableError>(
        upon executor: some Executor,
        to start: @escaping @Sendable (Failure) -> Attempt<Success, NewFailure>
    ) -> Attempt<Success, NewFailure> {
        fallbackChangingFailure(upon: executor, to: start)
    }

    /// Returns an attempt that succeeds with this attempt's value, or continues with an attempt
    /// that fails with `any Error`, which `start` makes from its error.
    ///
    /// The same as the ``CancellableError`` overload above, into `any Error`: a cancellation
    /// fails the new attempt with `CancellationError` and does not run `start`.
    ///
    /// - Parameters:
    ///   - executor: Where `start` runs. See ``Executor``.
    ///   - start: Starts another attempt from the error.
    /// - Returns: An attempt of this attempt's value or the fallback's result.
    @_disfavoredOverload  // An attempt of `any Error` keeps its type with the plain `fallback`.
    public func fallback(
        upon executor: some Executor,
        to start: @escaping @Sendable (Failure) -> Attempt<Success, any Error>
    ) -> Attempt<Success, any Error> {
        fallbackChangingFailure(upon: executor, to: start)
    }

    /// A fallback into a failure type that has a cancellation error of its own.
    ///
    /// This attempt's result, whichever it is, becomes a value ("settled"), and the step after it
    /// falls back on a failure. A cancellation stops at the settled stage, as that type's own
    /// error.
    private func fallbackChangingFailure<NewFailure: Error>(
        upon executor: some Executor,
        to start: @escaping @Sendable (Failure) -> Attempt<Success, NewFailure>
    ) -> Attempt<Success, NewFailure> {
        typealias Step = SettledStep<Success, Failure, NewFailure>
        let keep: Step.Body = { (result) throws(NewFailure) in result }
        let settled = derive(Step.self, upon: ImmediateExecutor.shared, body: keep, cancellation: nil)
        return settled.andThen(upon: executor) { result in
            switch result {
            case .success(let value): Attempt<Success, NewFailure>(succeededWith: value)
            case .failure(let error): start(error)
            }
        }
    }
}

extension Attempt where Failure == Never {
    /// Returns this attempt with a failure type it can be combined with, like Combine's
    /// `setFailureType(to:)`.
    ///
    /// ```swift
    /// let cached: Attempt<Page, Never> = cache.page(id)
    /// let either = [cached.setFailureType(to: APIError.self), api.page(id)].firstSucceeded()
    /// ```
    ///
    /// An attempt that cannot fail can still be cancelled: the new attempt is then cancelled
    /// with `NewFailure`'s cancellation error, if it has one. To make an attempt of a plain
    /// future, use ``init(_:)-(FutureProtocol<Success>)``.
    ///
    /// - Parameter failureType: The new failure type.
    /// - Returns: An attempt of the same value with the new failure type.
    public func setFailureType<NewFailure: Error>(to failureType: NewFailure.Type) -> Attempt<Success, NewFailure> {
        mapError(upon: .immediate, cancellation: nil) { never -> NewFailure in }
    }
}

/// The step that turns its source's result, whichever it is, into the derived attempt's value.
///
/// It is the first half of a `fallback` into another failure type. Only a cancellation fails
/// it, with its own failure type's cancellation error, which the public `fallback`s require.
@usableFromInline
internal enum SettledStep<Input: Sendable, InputFailure: Error, Failure: Error>: AttemptStep {
    @usableFromInline
    internal static var traceName: String {
        "settled"
    }

    @usableFromInline internal typealias Success = Result<Input, InputFailure>
    @usableFromInline internal typealias Output = Success
    @usableFromInline internal typealias Argument = Result<Input, InputFailure>
    @usableFromInline internal typealias Made = Success
    @usableFromInline internal typealias Thrown = Failure

    @inlinable
    internal static func runs(for input: Result<Input, InputFailure>) -> Bool {
        true
    }

    /// Never asked: the step runs for every input.
    @inlinable
    internal static func passedOn(_ input: Result<Input, InputFailure>) -> Result<Success, Failure> {
        .success(input)
    }

    @inlinable
    internal static func cancellation(of input: Result<Input, InputFailure>, ownError: Failure?) -> Failure? {
        ownError
    }

    @inlinable
    internal static func run(_ body: Body, on input: Result<Input, InputFailure>) -> Result<Success, Failure> {
        Result { () throws(Failure) in try body(input) }
    }
}
