public import Dispatch

extension Attempt {
    /// Calls `body` with the value, on `executor`, if the attempt succeeds.
    ///
    /// - Parameters:
    ///   - executor: Where `body` runs; a global concurrent Dispatch queue by default.
    ///   - body: Called once with the value, or never.
    public func uponSuccess(
        _ executor: some Executor = DispatchQueue.global(),
        execute body: @escaping @Sendable (Success) -> Void
    ) {
        upon(executor) { result in
            if case .success(let value) = result {
                body(value)
            }
        }
    }

    /// Calls `body` with the error, on `executor`, if the attempt fails (or is cancelled).
    ///
    /// - Parameters:
    ///   - executor: Where `body` runs; a global concurrent Dispatch queue by default.
    ///   - body: Called once with the error, or never.
    public func uponFailure(
        _ executor: some Executor = DispatchQueue.global(),
        execute body: @escaping @Sendable (Failure) -> Void
    ) {
        upon(executor) { result in
            if case .failure(let error) = result {
                body(error)
            }
        }
    }
}
