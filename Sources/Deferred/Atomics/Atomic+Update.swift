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
    /// Every load acquires and every store acquires and releases: one ordering for all
    /// transitions keeps each proof to "the word orders everything around it". (On x86 every
    /// compare-and-swap is a full barrier anyway; elsewhere the difference is a few cycles,
    /// and only where a transition succeeds.)
    ///
    /// - Parameters:
    ///   - observed: The word the caller last saw; `nil` loads it first.
    ///   - transition: The pure step from the observed word to the next.
    /// - Returns: The word observed last (the one replaced, or the one `transition` declined)
    ///   and whether it was replaced.
    @inlinable
    @inline(__always)
    package func update(from observed: UInt? = nil, _ transition: (UInt) -> UInt?) -> (observed: UInt, updated: Bool) {
        var observed = observed ?? load(ordering: .acquiring)
        while let next = transition(observed) {
            let (exchanged, original) = compareExchange(
                expected: observed, desired: next, successOrdering: .acquiringAndReleasing, failureOrdering: .acquiring)
            if exchanged {
                return (observed, true)
            }
            observed = original
        }
        return (observed, false)
    }
}
