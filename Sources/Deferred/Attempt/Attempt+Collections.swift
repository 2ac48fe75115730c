extension Collection {
    /// Returns an attempt that succeeds with every value, in collection order, once all these
    /// attempts succeed, and fails as soon as one fails, with that error.
    ///
    /// ```swift
    /// let pages = ids.map(api.page).allSucceeded()   // Attempt<[Page], APIError>
    /// ```
    ///
    /// When the joined attempt fails or is cancelled, the attempts still running are cancelled,
    /// unless something else needs them. An empty collection succeeds at once with `[]`.
    ///
    /// - Returns: An attempt of all the values.
    public func allSucceeded<Success, Failure>() -> Attempt<[Success], Failure>
    where Element == Attempt<Success, Failure> {
        guard !isEmpty else {
            return Attempt(success: [])
        }
        let joined = AttemptControl<[Success], Failure>()
        let values = map { _ in Deferred<Success>() }
        let remaining = Countdown(values.count) {
            joined.complete(with: .success(values.map { $0.peek().unsafelyUnwrapped }))
        }
        for (attempt, value) in zip(self, values) {
            attempt.control?.addDemand(until: joined)
            attempt.result.upon(ImmediateExecutor.shared) { result in
                switch result {
                case .success(let success):
                    value.fill(with: success)
                    remaining.arrive()
                case .failure(let error):
                    joined.complete(with: .failure(error))
                }
            }
        }
        return Attempt(joined)
    }
}

extension Sequence {
    /// Returns an attempt that succeeds with the value of whichever of these attempts succeeds
    /// first, and fails with the last error if all fail.
    ///
    /// ```swift
    /// let reply = [primary.lookup(key), replica.lookup(key)].firstSucceeded()
    /// ```
    ///
    /// Once one succeeds, the others are cancelled, unless something else needs them. An empty
    /// sequence fails at once with `Failure.cancelled`: there is nothing to wait for.
    ///
    /// - Returns: An attempt of the first value.
    public func firstSucceeded<Success, Failure>() -> Attempt<Success, Failure>
    where Element == Attempt<Success, Failure> {
        let attempts = Array(self)
        guard !attempts.isEmpty else {
            return Attempt(failure: .cancelled)
        }
        let first = AttemptControl<Success, Failure>()
        let remaining = Countdown(attempts.count) {}
        for attempt in attempts {
            attempt.control?.addDemand(until: first)
            attempt.result.upon(ImmediateExecutor.shared) { result in
                switch result {
                case .success:
                    first.complete(with: result)
                case .failure:
                    if remaining.arrive() {
                        first.complete(with: result)
                    }
                }
            }
        }
        return Attempt(first)
    }
}
