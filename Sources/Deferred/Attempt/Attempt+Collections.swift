extension Collection {
    /// Returns an attempt that succeeds with every value, in collection order, once all these
    /// attempts succeed, and fails as soon as one fails, with that error.
    ///
    /// ```swift
    /// let pages = ids.map(api.page).allSucceeded()   // Attempt<[Page], APIError>
    /// ```
    ///
    /// The failure is the first in time, not in collection order. When the joined attempt
    /// fails or is cancelled, the attempts still running are cancelled, unless something else
    /// needs them; if one of them is cancelled, the joined attempt is cancelled too. An empty
    /// collection succeeds at once with `[]`.
    ///
    /// - Returns: An attempt of all the values.
    public func allSucceeded<Success, Failure>() -> Attempt<[Success], Failure>
    where Element == Attempt<Success, Failure> {
        guard let first = first else {
            return Attempt(result: .success([]))
        }
        let join = AllSucceededAttemptNode<Success, [Success], Failure>(
            count: count, cancellation: first.node.cancellation, combine: { $0 })
        join.holdDemand(of: map { $0.node })
        join.linkAll(self)
        return Attempt(node: join)
    }
}

extension Sequence {
    /// Returns an attempt that succeeds with the value of whichever of these attempts succeeds
    /// first, and fails with the last failure if all fail.
    ///
    /// ```swift
    /// let reply = [primary.lookup(key), replica.lookup(key)].firstSucceeded()
    /// ```
    ///
    /// Once one succeeds, the others are cancelled, unless something else needs them. If every
    /// one fails and the last was cancelled, the result is cancelled too. An empty sequence
    /// gives an attempt that never finishes unless it is cancelled, like ``Future/never``.
    ///
    /// - Returns: An attempt of the first value.
    public func firstSucceeded<Success, Failure>() -> Attempt<Success, Failure>
    where Element == Attempt<Success, Failure> {
        let attempts = Array(self)
        let join = FirstSucceededAttemptNode<Success, Failure>(
            count: attempts.count, cancellation: attempts.first?.node.cancellation)
        join.holdDemand(of: attempts.map { $0.node })
        join.linkAll(attempts)
        return Attempt(node: join)
    }
}

extension Attempt {
    /// Returns an attempt that succeeds with a tuple of this attempt's value and the others'
    /// values once all of them succeed, and fails as soon as one fails, with that error.
    ///
    /// The attempts may have different success types and share one failure type:
    ///
    /// ```swift
    /// let screen = api.user(id).and(api.avatar(id), api.settings())  // Attempt<(User, Image, Settings), APIError>
    /// ```
    ///
    /// Like ``Swift/Collection/allSucceeded()``, a failure or cancellation cancels the attempts
    /// still running unless something else needs them.
    ///
    /// - Parameter others: The attempts to join with this one.
    /// - Returns: An attempt of all the values, in argument order.
    public func and<each Other: Sendable>(
        _ others: repeat Attempt<each Other, Failure>
    ) -> Attempt<(Success, repeat each Other), Failure> {
        var inputs: [any DemandSource] = [node]
        for other in repeat each others {
            inputs.append(other.node)
        }
        let join = AllSucceededAttemptNode<any Sendable, (Success, repeat each Other), Failure>(
            count: inputs.count, cancellation: node.cancellation
        ) { values in
            var index = 0
            func next<Value>(_: Value.Type) -> Value {
                defer { index += 1 }
                return values[index] as! Value
            }
            return (next(Success.self), repeat next((each Other).self))
        }
        join.holdDemand(of: inputs)
        join.link(self, at: 0) { $0 }
        var index = 0
        for other in repeat each others {
            index += 1
            join.link(other, at: index) { $0 }
        }
        return Attempt<(Success, repeat each Other), Failure>(node: join)
    }
}
