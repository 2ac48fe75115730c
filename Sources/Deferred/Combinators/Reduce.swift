extension Collection where Element: FutureProtocol {
    /// Returns a future filled with the result of combining every value of these futures, in
    /// the collection's order, once the last of them is filled.
    ///
    /// ```swift
    /// let total = carts.map { $0.price() }.reduce(0, upon: .immediate, +)
    /// ```
    ///
    /// It is ``allFilled()`` followed by a ``FutureProtocol/map(upon:transform:)`` that folds the
    /// values, so `nextPartialResult` runs once per value, in order, on `executor`.
    ///
    /// - Parameters:
    ///   - initialResult: The result to start from; an empty collection gives it at once.
    ///   - executor: Where the values are combined. See ``Executor``.
    ///   - nextPartialResult: Combines the result so far with the next value.
    /// - Returns: A read-only future of the combined result.
    @_disfavoredOverload  // A collection of attempts folds their successes instead.
    public func reduce<Result: Sendable>(
        _ initialResult: Result, upon executor: some Executor,
        _ nextPartialResult: @escaping @Sendable (Result, Element.Value) -> Result
    ) -> Future<Result> {
        allFilled().map(upon: executor) { $0.reduce(initialResult, nextPartialResult) }
    }

    /// Returns a future filled with the first value, in the collection's order, that
    /// `predicate` accepts, or `nil`, once every one of these futures is filled.
    ///
    /// ```swift
    /// let firstFree = rooms.map { $0.availability() }.first(upon: .immediate) { $0.isFree }
    /// ```
    ///
    /// Like `first(where:)` on the values: ``allFilled()`` followed by a
    /// ``FutureProtocol/map(upon:transform:)``. To take whichever future is filled first, use
    /// ``Swift/Sequence/firstFilled()``.
    ///
    /// - Parameters:
    ///   - executor: Where `predicate` runs. See ``Executor``.
    ///   - predicate: Accepts the value to find.
    /// - Returns: A read-only future of the first accepted value, or `nil` if there is none.
    @_disfavoredOverload  // A collection of attempts searches their successes instead.
    public func first(
        upon executor: some Executor, where predicate: @escaping @Sendable (Element.Value) -> Bool
    ) -> Future<Element.Value?> {
        allFilled().map(upon: executor) { $0.first(where: predicate) }
    }
}

extension Sequence {
    /// Makes a future for each element with `transform`, and returns a future of all their
    /// values, in the sequence's order, once the last is filled.
    ///
    /// ```swift
    /// let avatars = userIDs.allFilled { service.avatar(for: $0) }  // Future<[Image]>
    /// ```
    ///
    /// `transform` runs now, once per element, on the calling thread; it only starts the work.
    /// It is `map(transform).allFilled()`.
    ///
    /// - Parameter transform: Starts the work for one element.
    /// - Returns: A read-only future of every value, in the sequence's order.
    public func allFilled<Each: FutureProtocol>(_ transform: (Element) throws -> Each) rethrows -> Future<[Each.Value]>
    {
        try map(transform).allFilled()
    }
}
