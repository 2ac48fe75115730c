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
    @inlinable
    public func map<NewSuccess: Sendable>(
        upon executor: some Executor,
        transform: @escaping @Sendable (Success) throws(Failure) -> NewSuccess
    ) -> Attempt<NewSuccess, Failure> {
        attach(
            MapAttemptNode(on: self, executor: executor.runsInPlace ? nil : executor, transform: transform),
            MapAttemptNode<Success, NewSuccess, Failure>.receive
        )
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
    /// A cancellation passes through without calling `transform`: the new attempt fails with
    /// its own cancellation error (`.cancelled` for a ``CancellableError``, `CancellationError`
    /// for `any Error`, otherwise `transform` applied to this attempt's cancellation error).
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
        attach(
            MapErrorAttemptNode(on: self, executor: executor.runsInPlace ? nil : executor, transform: transform),
            MapErrorAttemptNode<Success, Failure, NewFailure>.receive
        )
    }

    /// Returns an attempt that continues with the attempt `start` makes from this attempt's
    /// value.
    ///
    /// ```swift
    /// let avatar = api.user(id).andThen(upon: .global()) { user in api.image(at: user.avatarURL) }
    /// ```
    ///
    /// `start` runs once, on `executor`, when this attempt succeeds, unless the new attempt has
    /// been cancelled by then. Cancelling the new attempt cancels whichever attempt it is
    /// waiting for — this one, or the one `start` made — unless something else needs it.
    ///
    /// - Parameters:
    ///   - executor: Where `start` runs. See ``Executor``.
    ///   - start: Starts the next step, or throws a failure.
    /// - Returns: An attempt of the next step's result.
    @inlinable
    public func andThen<NewSuccess: Sendable>(
        upon executor: some Executor,
        start: @escaping @Sendable (Success) throws(Failure) -> Attempt<NewSuccess, Failure>
    ) -> Attempt<NewSuccess, Failure> {
        attach(
            AndThenAttemptNode(on: self, executor: executor.runsInPlace ? nil : executor, start: start),
            AndThenAttemptNode<Success, NewSuccess, Failure>.receive
        )
    }
}

/// The node of a `map`: runs the transform on a success.
@usableFromInline
internal final class MapAttemptNode<Input: Sendable, Success: Sendable, Failure: Error>:
    StepAttemptNode<Input, Failure, Success, Failure>, @unchecked Sendable
{
    @exclusivity(unchecked)
    @usableFromInline
    internal var transform: (@Sendable (Input) throws(Failure) -> Success)?

    @inlinable
    internal init(
        on source: Attempt<Input, Failure>,
        executor: (any Executor)?,
        transform: @escaping @Sendable (Input) throws(Failure) -> Success
    ) {
        self.transform = transform
        super.init(on: source, executor: executor, cancellation: source.node.cancellation)
    }

    @inlinable
    override internal func passedOn(_ input: Result<Input, Failure>) -> Result<Success, Failure>? {
        if case .failure(let error) = input { .failure(error) } else { nil }
    }

    @inlinable
    override internal func cancellationPassedOn(_ input: Result<Input, Failure>) -> Failure? {
        input.failure ?? cancellationError
    }

    @inlinable
    override internal func runStep(_ input: Result<Input, Failure>) -> Result<Success, Failure>? {
        guard let transform = transform.take(), case .success(let value) = input else {
            return nil
        }
        return Result { () throws(Failure) in try transform(value) }
    }

    @inlinable
    override internal func dropStep() {
        transform = nil
    }
}

/// The node of a `mapError`: runs the transform on a failure that is not a cancellation.
@usableFromInline
internal final class MapErrorAttemptNode<Success: Sendable, InputFailure: Error, Failure: Error>:
    StepAttemptNode<Success, InputFailure, Success, Failure>, @unchecked Sendable
{
    @exclusivity(unchecked)
    @usableFromInline
    internal var transform: (@Sendable (InputFailure) -> Failure)?

    @inlinable
    internal init(
        on source: Attempt<Success, InputFailure>,
        executor: (any Executor)?,
        transform: @escaping @Sendable (InputFailure) -> Failure
    ) {
        self.transform = transform
        super.init(
            on: source, executor: executor,
            cancellation: .translating(source.node.cancellation, with: transform)
        )
    }

    @inlinable
    override internal func passedOn(_ input: Result<Success, InputFailure>) -> Result<Success, Failure>? {
        if case .success(let value) = input { .success(value) } else { nil }
    }

    @inlinable
    override internal func cancellationPassedOn(_ input: Result<Success, InputFailure>) -> Failure? {
        cancellationError
    }

    @inlinable
    override internal func runStep(_ input: Result<Success, InputFailure>) -> Result<Success, Failure>? {
        guard let transform = transform.take(), case .failure(let error) = input else {
            return nil
        }
        return .failure(transform(error))
    }

    @inlinable
    override internal func dropStep() {
        transform = nil
    }
}

extension CancellationErrorSource {
    /// The cancellation error source of an attempt whose errors are `transform` applied to
    /// those of an attempt with `source`: `nil` (the type's own) if `Failure` has one, else
    /// `transform` of the source's cancellation error, if that has one.
    @usableFromInline
    internal static func translating<SourceFailure: Error>(
        _ source: CancellationErrorSource<SourceFailure>?,
        with transform: @escaping @Sendable (SourceFailure) -> Failure
    ) -> CancellationErrorSource? {
        guard !hasTypeDefault, source != nil || CancellationErrorSource<SourceFailure>.hasTypeDefault else {
            return nil
        }
        return CancellationErrorSource { transform(source.cancellationError().unsafelyUnwrapped) }
    }
}

/// The node of an `andThen`: starts the next attempt from a success.
@usableFromInline
internal final class AndThenAttemptNode<Input: Sendable, Success: Sendable, Failure: Error>:
    FollowingAttemptNode<Input, Success, Failure>, @unchecked Sendable
{
    @exclusivity(unchecked)
    @usableFromInline
    internal var start: (@Sendable (Input) throws(Failure) -> Attempt<Success, Failure>)?

    @inlinable
    internal init(
        on source: Attempt<Input, Failure>,
        executor: (any Executor)?,
        start: @escaping @Sendable (Input) throws(Failure) -> Attempt<Success, Failure>
    ) {
        self.start = start
        super.init(on: source, executor: executor)
    }

    @inlinable
    override internal func passedOn(_ input: Result<Input, Failure>) -> Result<Success, Failure>? {
        if case .failure(let error) = input { .failure(error) } else { nil }
    }

    @inlinable
    override internal func runStep(_ input: Result<Input, Failure>) -> Result<Attempt<Success, Failure>, Failure>? {
        guard let start = start.take(), case .success(let value) = input else {
            return nil
        }
        return Result { () throws(Failure) in try start(value) }
    }

    @inlinable
    override internal func dropStep() {
        start = nil
    }
}
