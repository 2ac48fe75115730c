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
    /// A cancellation passes through without calling `transform`: the new attempt fails with
    /// its own cancellation error (`.cancelled` for a ``CancellableError``, `CancellationError`
    /// for `any Error`). For any other new failure type, the cancellation error is `transform`
    /// applied to this attempt's cancellation error, which `mapError` computes once, on the
    /// calling thread, when it is called.
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
        typealias Step = MapErrorStep<Success, Failure, NewFailure>
        // Converted here, where the types are concrete: generic inference in `derive` will not
        // widen a non-throwing closure to `throws(NewFailure)`.
        let body: Step.Body = transform
        return derive(
            Step.self, upon: executor, body: body,
            cancellation: .translating(node.cancellation, with: transform))
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
    @_disfavoredOverload  // A closure that cannot throw takes the overload below.
    @inlinable
    public func andThen<NewSuccess: Sendable>(
        upon executor: some Executor,
        start: @escaping @Sendable (Success) throws(Failure) -> Attempt<NewSuccess, Failure>
    ) -> Attempt<NewSuccess, Failure> {
        typealias Node = FollowingAttemptNode<OnSuccessStep<Success, NewSuccess, Attempt<NewSuccess, Failure>, Failure>>
        return attach(
            Node(on: self, executor: executor.runsInPlace ? nil : executor, body: start),
            Node.receive
        )
    }

    /// Returns an attempt that continues with the attempt `start` makes from this attempt's
    /// value; see `andThen(upon:start:)` with a closure that throws.
    ///
    /// This overload takes a `start` that cannot throw, so that the failure type comes from this
    /// attempt, not from the closure.
    ///
    /// - Parameters:
    ///   - executor: Where `start` runs. See ``Executor``.
    ///   - start: Starts the next step.
    /// - Returns: An attempt of the next step's result.
    @inlinable
    public func andThen<NewSuccess: Sendable>(
        upon executor: some Executor,
        start: @escaping @Sendable (Success) -> Attempt<NewSuccess, Failure>
    ) -> Attempt<NewSuccess, Failure> {
        let body: @Sendable (Success) throws(Failure) -> Attempt<NewSuccess, Failure> = start
        return andThen(upon: executor, start: body)
    }
}

extension CancellationErrorSource {
    /// The cancellation error source of an attempt whose errors are `transform` applied to
    /// those of an attempt with `source`: `nil` (the type's own) if `Failure` has one, else
    /// `transform` of the source's cancellation error, if that has one, applied now.
    @usableFromInline
    internal static func translating<SourceFailure: Error>(
        _ source: CancellationErrorSource<SourceFailure>?,
        with transform: @escaping @Sendable (SourceFailure) -> Failure
    ) -> CancellationErrorSource? {
        guard !hasTypeDefault, source != nil || CancellationErrorSource<SourceFailure>.hasTypeDefault else {
            return nil
        }
        return CancellationErrorSource(transform(source.cancellationError().unsafelyUnwrapped))
    }
}
