extension Attempt {
    /// Returns an attempt that succeeds with this attempt's value, or with the value
    /// `recovery` makes from its error.
    ///
    /// ```swift
    /// let settings = loadSettings().recover(upon: .immediate) { _ in .defaults }
    /// ```
    ///
    /// A cancellation of this attempt reaches `recovery` as `Failure.cancelled`; throw it on to
    /// stay cancelled.
    ///
    /// - Parameters:
    ///   - executor: Where `recovery` runs. See ``Executor``.
    ///   - recovery: Makes a value from the error, or throws a failure.
    /// - Returns: An attempt that fails only if `recovery` throws.
    public func recover(
        upon executor: some Executor,
        substituting recovery: @escaping @Sendable (Failure) throws(Failure) -> Success
    ) -> Attempt<Success, Failure> {
        derive(upon: executor) { result, derived in
            switch result {
            case .success:
                derived.complete(with: result)
            case .failure(let error):
                derived.complete(with: Result { () throws(Failure) in try recovery(error) })
            }
        }
    }

    /// Returns an attempt that succeeds with this attempt's value, or continues with the attempt
    /// `start` makes from its error.
    ///
    /// ```swift
    /// let page = primary.fetch(path).fallback(upon: .global()) { _ in mirror.fetch(path) }
    /// ```
    ///
    /// - Parameters:
    ///   - executor: Where `start` runs. See ``Executor``.
    ///   - start: Starts another attempt from the error, or throws a failure.
    /// - Returns: An attempt of this attempt's value or the fallback's result.
    public func fallback(
        upon executor: some Executor,
        to start: @escaping @Sendable (Failure) throws(Failure) -> Attempt<Success, Failure>
    ) -> Attempt<Success, Failure> {
        derive(upon: executor) { result, derived in
            switch result {
            case .success:
                derived.complete(with: result)
            case .failure(let error):
                do throws(Failure) {
                    derived.follow(try start(error))
                } catch {
                    derived.complete(with: .failure(error))
                }
            }
        }
    }
}
