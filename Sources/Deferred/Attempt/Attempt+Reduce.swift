extension Collection {
    /// Returns an attempt that succeeds with the result of combining every value, in the
    /// collection's order, once all these attempts succeed, and fails as soon as one fails.
    ///
    /// ```swift
    /// let total = orders.map { api.price(of: $0) }.reduce(0, upon: .immediate, +)
    /// ```
    ///
    /// It is ``allSucceeded()`` followed by a ``Attempt/map(upon:transform:)-(_,(Success)->NewSuccess)``
    /// that folds the values: it fails, cancels and stops the other work as `allSucceeded()` does.
    ///
    /// - Parameters:
    ///   - initialResult: The result to start from; an empty collection succeeds with it.
    ///   - executor: Where the values are combined. See ``Executor``.
    ///   - nextPartialResult: Combines the result so far with the next value.
    /// - Returns: An attempt of the combined result.
    public func reduce<Result: Sendable, Success, Failure>(
        _ initialResult: Result, upon executor: some Executor,
        _ nextPartialResult: @escaping @Sendable (Result, Success) -> Result
    ) -> Attempt<Result, Failure> where Element == Attempt<Success, Failure> {
        allSucceeded().map(upon: executor) { $0.reduce(initialResult, nextPartialResult) }
    }

    /// Returns an attempt that succeeds with the first value, in the collection's order, that
    /// `predicate` accepts, or `nil`, once all these attempts succeed; it fails as soon as one
    /// fails.
    ///
    /// ```swift
    /// let mirror = mirrors.map { $0.probe() }.first(upon: .immediate) { $0.latency < .seconds(1) }
    /// ```
    ///
    /// Like `first(where:)` on the values: ``allSucceeded()`` followed by a
    /// ``Attempt/map(upon:transform:)-(_,(Success)->NewSuccess)``. To take whichever succeeds
    /// first, use ``Swift/Sequence/firstSucceeded()``.
    ///
    /// - Parameters:
    ///   - executor: Where `predicate` runs. See ``Executor``.
    ///   - predicate: Accepts the value to find.
    /// - Returns: An attempt of the first accepted value, or `nil` if there is none.
    public func first<Success, Failure>(
        upon executor: some Executor, where predicate: @escaping @Sendable (Success) -> Bool
    ) -> Attempt<Success?, Failure> where Element == Attempt<Success, Failure> {
        allSucceeded().map(upon: executor) { $0.first(where: predicate) }
    }
}

extension Sequence {
    /// Starts an attempt for each element with `transform`, and returns an attempt that
    /// succeeds with all their values, in the sequence's order, or fails as soon as one fails.
    ///
    /// ```swift
    /// let users = ids.allSucceeded { api.user(id: $0) }  // Attempt<[User], APIError>
    /// ```
    ///
    /// `transform` runs now, once per element, on the calling thread; it only starts the work.
    /// It is `map(transform).allSucceeded()`: a failure or a cancellation stops the rest. If
    /// `transform` throws, the attempts it already started are cancelled, since nothing can
    /// read them any more, and the error is rethrown.
    ///
    /// - Parameter transform: Starts the work for one element.
    /// - Returns: An attempt of every value, in the sequence's order.
    public func allSucceeded<Success, Failure>(
        _ transform: (Element) throws -> Attempt<Success, Failure>
    ) rethrows -> Attempt<[Success], Failure> {
        var started: [Attempt<Success, Failure>] = []
        started.reserveCapacity(underestimatedCount)
        do {
            for element in self {
                started.append(try transform(element))
            }
        } catch {
            for attempt in started {
                attempt.cancel()
            }
            throw error
        }
        return started.allSucceeded()
    }
}
