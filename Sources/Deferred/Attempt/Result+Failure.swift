extension Result {
    /// The error, if this is a failure.
    @inlinable
    internal var failure: Failure? {
        if case .failure(let error) = self { error } else { nil }
    }
}
