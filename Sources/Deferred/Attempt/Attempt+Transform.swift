extension Attempt {
    /// Returns an attempt that succeeds with `transform` applied to this attempt's value, or
    /// fails with this attempt's error or the error `transform` throws.
    ///
    /// ```swift
    /// let names = fetchUsers().map(upon: .global()) { users throws(APIError) in
    ///     guard !users.isEmpty else { throw .empty }
    ///     return users.map(\.name)
    /// }
    /// ```
    ///
    /// Cancelling the new attempt before `transform` runs means it never runs, and cancels this
    /// attempt unless something else needs it.
    ///
    /// - Parameters:
    ///   - executor: Where `transform` runs. See ``Executor``.
    ///   - transform: Makes the new value, or throws a failure.
    /// - Returns: An attempt of the transformed value.
    public func map<NewSuccess: Sendable>(
        upon executor: some Executor,
        transform: @escaping @Sendable (Success) throws(Failure) -> NewSuccess
    ) -> Attempt<NewSuccess, Failure> {
        derive(upon: executor) { result, derived in
            switch result {
            case .success(let value):
                derived.complete(with: Result { () throws(Failure) in try transform(value) })
            case .failure(let error):
                derived.complete(with: .failure(error))
            }
        }
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
    /// A cancellation of this attempt reaches `transform` as `Failure.cancelled`; cancelling the
    /// new attempt fails it with `NewFailure.cancelled`.
    ///
    /// - Parameters:
    ///   - executor: Where `transform` runs. See ``Executor``.
    ///   - transform: Makes the new error.
    /// - Returns: An attempt with the new failure type.
    public func mapError<NewFailure: CancellableError>(
        upon executor: some Executor,
        transform: @escaping @Sendable (Failure) -> NewFailure
    ) -> Attempt<Success, NewFailure> {
        derive(upon: executor) { result, derived in
            derived.complete(with: result.mapError(transform))
        }
    }

    /// Returns an attempt that continues with the attempt `start` makes from this attempt's
    /// value.
    ///
    /// ```swift
    /// let avatar = api.user(id).andThen(upon: .global()) { user in api.image(at: user.avatarURL) }
    /// ```
    ///
    /// Cancelling the new attempt cancels whichever attempt it is waiting for, this one or the
    /// one `start` made, unless something else needs it.
    ///
    /// - Parameters:
    ///   - executor: Where `start` runs. See ``Executor``.
    ///   - start: Starts the next step, or throws a failure.
    /// - Returns: An attempt of the next step's result.
    public func andThen<NewSuccess: Sendable>(
        upon executor: some Executor,
        start: @escaping @Sendable (Success) throws(Failure) -> Attempt<NewSuccess, Failure>
    ) -> Attempt<NewSuccess, Failure> {
        derive(upon: executor) { result, derived in
            switch result {
            case .success(let value):
                do throws(Failure) {
                    derived.follow(try start(value))
                } catch {
                    derived.complete(with: .failure(error))
                }
            case .failure(let error):
                derived.complete(with: .failure(error))
            }
        }
    }
}
