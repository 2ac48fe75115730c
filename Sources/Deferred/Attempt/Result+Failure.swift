extension Result {
    /// The value, if this is a success (an optional value stays wrapped: `.success(nil)` is
    /// `.some(nil)`).
    @inlinable
    internal var success: Success? {
        if case .success(let value) = self { value } else { nil }
    }

    /// The error, if this is a failure.
    @inlinable
    internal var failure: Failure? {
        if case .failure(let error) = self { error } else { nil }
    }

    /// The value of a result known to be a success.
    @inlinable
    internal var successValueUnchecked: Success {
        guard case .success(let value) = self else {
            preconditionFailure("a step ran on an input it passes on")
        }
        return value
    }

    /// The error of a result known to be a failure.
    @inlinable
    internal var failureUnchecked: Failure {
        guard case .failure(let error) = self else {
            preconditionFailure("a step ran on an input it passes on")
        }
        return error
    }
}
