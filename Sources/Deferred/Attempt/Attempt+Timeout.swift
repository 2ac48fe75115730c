extension Attempt {
    /// Returns an attempt that finishes like this one if it finishes within `limit`, and
    /// otherwise fails with `error`, cancelling this attempt unless something else needs it.
    ///
    /// ```swift
    /// let reply = api.search(query).timeout(after: .seconds(2), upon: DispatchQueue.global(), failingWith: .timedOut)
    /// ```
    ///
    /// Unlike the plain future's timeout, which substitutes a value, this one stops the work.
    /// The limit only holds a weak reference to the new attempt, so an attempt that finished or
    /// was dropped early is released early.
    ///
    /// - Parameters:
    ///   - limit: How long to wait.
    ///   - executor: The executor that measures the limit.
    ///   - error: The failure when the limit passes first.
    /// - Returns: An attempt of this attempt's result, or of `error`.
    public func timeout(
        after limit: Duration,
        upon executor: some SchedulingExecutor,
        failingWith error: Failure
    ) -> Attempt<Success, Failure> {
        let limited = TimeoutAttemptNode<Success, Failure>(
            derived: shareDemand(), cancellation: node.cancellation, failure: error)
        let attempt = attach(limited, AttemptNode.forward)
        if !limited.isDecided {
            executor.submit(after: limit) { [weak limited] in
                limited?.expire()
            }
        }
        return attempt
    }
}

/// The node of an attempt's `timeout`: finishes with its source's result, or with its failure
/// when the limit passes first.
///
/// The failure waits in ``pending``, not in the timer's body, which holds the node only weakly:
/// once the attempt is decided, or dropped, the timer keeps nothing of it.
@usableFromInline
internal final class TimeoutAttemptNode<Success: Sendable, Failure: Error>: AttemptNode<Success, Failure>,
    @unchecked Sendable
{
    /// The failure for when the limit passes; taken when it does, or dropped on a cancellation.
    @usableFromInline
    internal let pending: AtomicReference<SlotValue<Result<Success, Failure>>>

    @usableFromInline
    internal init(derived demand: DerivedDemand, cancellation: CancellationErrorSource<Failure>?, failure: Failure) {
        pending = AtomicReference(SlotValue(.failure(failure)))
        super.init(derived: demand, cancellation: cancellation)
    }

    /// Decides this attempt with the failure, as the limit passes, unless it is decided.
    @usableFromInline
    internal func expire() {
        if let failure = pending.takeAndTag().object {
            decide(failure.value)
        }
    }

    @usableFromInline
    override internal func dropPendingWork() {
        _ = pending.takeAndTag()
    }
}
