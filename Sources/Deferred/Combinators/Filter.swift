extension FutureProtocol {
    /// Returns an attempt that succeeds with this future's value if `isIncluded` accepts it,
    /// and fails with `error` if not.
    ///
    /// ```swift
    /// let adult = profile.filter(upon: .immediate, failingWith: SignUpError.tooYoung) { $0.age >= 18 }
    /// ```
    ///
    /// A plain future cannot fail, so filtering one makes an ``Attempt``; the caller chooses the
    /// error that stands for "not accepted". It is ``Attempt/init(_:)-(FutureProtocol<Success>)``
    /// followed by ``Attempt/filter(upon:failingWith:_:)``.
    ///
    /// - Parameters:
    ///   - executor: Where `isIncluded` runs. See ``Executor``.
    ///   - error: The failure of a value that `isIncluded` rejects.
    ///   - isIncluded: Decides whether the value passes.
    /// - Returns: An attempt of the accepted value.
    @_disfavoredOverload  // An attempt's own `filter` filters its success, not its result.
    public func filter<Failure: Error>(
        upon executor: some Executor, failingWith error: Failure, _ isIncluded: @escaping @Sendable (Value) -> Bool
    ) -> Attempt<Value, Failure> {
        Attempt<Value, Failure>(self).filter(upon: executor, failingWith: error, isIncluded)
    }
}

extension Attempt {
    /// Returns an attempt that succeeds with this attempt's value if `isIncluded` accepts it,
    /// and fails with `error` if not.
    ///
    /// ```swift
    /// let match = api.search(query).filter(upon: .immediate, failingWith: .noResults) { !$0.isEmpty }
    /// ```
    ///
    /// A failure or a cancellation passes through without calling `isIncluded`. It is a
    /// ``map(upon:transform:)-(_,(Success)->NewSuccess)`` that throws `error`, with everything
    /// that promises.
    ///
    /// - Parameters:
    ///   - executor: Where `isIncluded` runs. See ``Executor``.
    ///   - error: The failure of a value that `isIncluded` rejects.
    ///   - isIncluded: Decides whether the value passes.
    /// - Returns: An attempt of the accepted value.
    public func filter(
        upon executor: some Executor, failingWith error: Failure, _ isIncluded: @escaping @Sendable (Success) -> Bool
    ) -> Attempt<Success, Failure> {
        map(upon: executor) { value throws(Failure) in
            guard isIncluded(value) else {
                throw error
            }
            return value
        }
    }
}
