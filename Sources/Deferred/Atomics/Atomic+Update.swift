public import Synchronization

extension Atomic where Value == UInt {
    /// Moves the word along `transition` with a compare-and-swap loop: the one such loop in
    /// the library, which every lock-free structure runs its pure transitions through.
    ///
    /// `transition` gets the word observed and returns the word to store, or `nil` to leave
    /// the word as it is and stop. If another thread changed the word in between, the store
    /// fails and `transition` runs again with the new word, so it must be pure apart from
    /// preparing what the store publishes (a node's link, say).
    ///
    /// - Parameters:
    ///   - observed: The word the caller last saw; `nil` loads it first.
    ///   - success: The ordering of the store that succeeds.
    ///   - failure: The ordering of the first load and of each failed store.
    ///   - transition: The pure step from the observed word to the next.
    /// - Returns: The word observed last (the one replaced, or the one `transition` declined)
    ///   and whether it was replaced.
    @inlinable
    @inline(__always)
    package func update(
        from observed: UInt? = nil,
        success: UpdateOrdering,
        failure: FailureOrdering = .relaxed,
        _ transition: (UInt) -> UInt?
    ) -> (observed: UInt, updated: Bool) {
        var observed = observed ?? load(failure)
        while let next = transition(observed) {
            let (exchanged, original) = compareExchange(observed, next, success, failure)
            if exchanged {
                return (observed, true)
            }
            observed = original
        }
        return (observed, false)
    }

    /// The orderings a successful update may have. (The atomics take orderings as
    /// compile-time constants, so ``update(from:success:failure:_:)`` names them this way and
    /// picks the constant; the choice folds away once it is inlined.)
    @frozen
    @usableFromInline
    package enum UpdateOrdering {
        case relaxed, acquiring, releasing, acquiringAndReleasing
    }

    /// The orderings a load or a failed update may have.
    @frozen
    @usableFromInline
    package enum FailureOrdering {
        case relaxed, acquiring
    }

    @inlinable
    @inline(__always)
    internal func load(_ ordering: FailureOrdering) -> UInt {
        switch ordering {
        case .relaxed: load(ordering: .relaxed)
        case .acquiring: load(ordering: .acquiring)
        }
    }

    @inlinable
    @inline(__always)
    internal func compareExchange(
        _ expected: UInt, _ desired: UInt, _ success: UpdateOrdering, _ failure: FailureOrdering
    ) -> (exchanged: Bool, original: UInt) {
        switch (success, failure) {
        case (.relaxed, .relaxed):
            compareExchange(expected: expected, desired: desired, successOrdering: .relaxed, failureOrdering: .relaxed)
        case (.relaxed, .acquiring):
            compareExchange(
                expected: expected, desired: desired, successOrdering: .relaxed, failureOrdering: .acquiring)
        case (.acquiring, .relaxed):
            compareExchange(
                expected: expected, desired: desired, successOrdering: .acquiring, failureOrdering: .relaxed)
        case (.acquiring, .acquiring):
            compareExchange(
                expected: expected, desired: desired, successOrdering: .acquiring, failureOrdering: .acquiring)
        case (.releasing, .relaxed):
            compareExchange(
                expected: expected, desired: desired, successOrdering: .releasing, failureOrdering: .relaxed)
        case (.releasing, .acquiring):
            compareExchange(
                expected: expected, desired: desired, successOrdering: .releasing, failureOrdering: .acquiring)
        case (.acquiringAndReleasing, .relaxed):
            compareExchange(
                expected: expected, desired: desired, successOrdering: .acquiringAndReleasing,
                failureOrdering: .relaxed)
        case (.acquiringAndReleasing, .acquiring):
            compareExchange(
                expected: expected, desired: desired, successOrdering: .acquiringAndReleasing,
                failureOrdering: .acquiring)
        }
    }
}
