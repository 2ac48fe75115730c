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
    /// The error is typed. It returns the result as it was decided, like ``peek()``: a
    /// cancellation that comes after the attempt succeeded does not change it. While the task
    /// waits, the attempt counts as needed; if the awaiting task is cancelled, this throws the
    /// attempt's cancellation error at once and cancels the attempt unless something else needs
    /// it. (An attempt whose failure type has no cancellation error keeps waiting for its
    /// result.)
    ///
    /// - Returns: The value.
    /// - Throws: The attempt's failure, or its cancellation error.
    nonisolated(nonsending)
        public func get() async throws(Failure) -> Success
    {
        if let result = node.settledPeek() {
            return try result.get()
        }
        // A task that may give up continues the path of a stage that shares its source's
        // demand: it takes over the unit the stage holds for itself, so that when the task gives
        // up, nothing is left that needs the stage.
        guard let unit = node.takeUnit(forOwner: true) else {
            node.settleIfAbandoned()
            return try await Future(storage: node).value.get()
        }
        let result: Result<Success, Failure>
        do {
            result = try await Future(storage: node).get()
        } catch {
            // The awaiting task was cancelled: stop needing the attempt, then report it.
            unit.release()
            guard let cancellation = node.cancellationError else {
                return try await Future(storage: node).value.get()
            }
            throw cancellation
        }
        unit.release()
        return try result.get()
    }
}
