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
        if let result = node.peek() {
            if node.isTraced {
                node.traceObserved()
            }
            return try result.get()
        }
        // A task that may give up holds a unit of the attempt's demand, so that when it gives
        // up, the attempt stops unless something else needs it. None is left to take if the
        // attempt is decided, being decided, or stopped: the task waits for the result then, or,
        // if the attempt was orphaned and never gets one, until it is cancelled.
        //
        // Under a deadline (``Deadline/run(until:priority:_:)``), the task counts as a consumer
        // bounded by it, so that the producer learns until when it waits.
        let unit: DemandUnit?
        if let deadline = Deadline.current {
            unit = DemandUnit(readerOf: node, until: deadline)
        } else {
            unit = node.takeUnit() ? DemandUnit(node) : nil
        }
        // The waiter gives the unit back as the result is delivered, on the thread that
        // decides the attempt: a `cancel()` that decides it has stopped what nothing else
        // needs by the time it returns, without waiting for this task to run again.
        let waiter = unit.map { DemandReleasingWaiter<Result<Success, Failure>>($0) } ?? AsyncWaiter()
        let result: Result<Success, Failure>
        do {
            result = try await Future(storage: node).value(awaitedBy: waiter)
        } catch {
            // The awaiting task was cancelled: stop needing the attempt (which stops it unless
            // something else needs it), then report it.
            // Cancelled because its deadline passed (`Deadline.run` cancels the operation's
            // task then), or by someone.
            let deadlinePassed = Deadline.current.map { $0 <= .now } ?? false
            unit?.release(reasonBits: deadlinePassed ? DemandState.stoppedByDeadline : DemandState.stoppedByCancel)
            guard let cancellation = node.cancellationError else {
                return try await Future(storage: node).value.get()
            }
            throw cancellation
        }
        if !waiter.isFinished {
            unit?.release()  // Decided before the waiter was needed: nothing delivered through it.
        }
        return try result.get()
    }
}

/// A task's wait in `get()` that holds a unit of demand on the attempt, and gives it back as the
/// result is delivered (a cancelled task gives it back itself).
///
/// `@unchecked Sendable` is sound as for ``AsyncWaiter``: the only field added is a constant.
@usableFromInline
internal final class DemandReleasingWaiter<Value: Sendable>: AsyncWaiter<Value>, @unchecked Sendable {
    @usableFromInline
    internal let unit: DemandUnit

    @usableFromInline
    internal init(_ unit: DemandUnit) {
        self.unit = unit
        super.init()
    }

    @usableFromInline
    override internal func deliver(_ value: Value) {
        unit.release()
        super.deliver(value)
    }
}
