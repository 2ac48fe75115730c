extension Attempt {
    /// Returns the value once the attempt succeeds, or throws its error.
    ///
    /// ```swift
    /// do {
    ///     let results = try await search(query).get()
    /// } catch .offline {
    ///     showOffline()
    /// } catch {
    ///     // SearchError.cancelled, or another SearchError
    /// }
    /// ```
    ///
    /// The error is typed. If the awaiting task is cancelled, this throws `Failure.cancelled` at
    /// once and cancels the attempt unless something else needs it.
    ///
    /// - Returns: The value.
    /// - Throws: The attempt's failure, or `Failure.cancelled`.
    nonisolated(nonsending)
        public func get() async throws(Failure) -> Success
    {
        guard let control else {
            return try result.peek().unsafelyUnwrapped.get()
        }
        control.addDemand()
        defer { control.dropDemand() }
        let result: Result<Success, Failure>
        do {
            result = try await control.result.get()
        } catch {
            throw Failure.cancelled  // The awaiting task was cancelled.
        }
        return try result.get()
    }
}
