extension FutureProtocol {
    /// Returns a future filled with this future's value `delay` after this one is filled.
    ///
    /// ```swift
    /// let shownLater = toast.delay(by: .seconds(1), upon: DispatchQueue.main)
    /// ```
    ///
    /// - Parameters:
    ///   - delay: How long after the fill to wait.
    ///   - executor: The executor that measures the delay and fills the result.
    /// - Returns: A read-only future of the same value, filled later.
    public func delay(by delay: Duration, upon executor: some SchedulingExecutor) -> Future<Value> {
        // A map that passes the value on, run by an executor that submits after the delay.
        map(upon: DelayingExecutor(base: executor, delay: delay)) { $0 }
    }
}

/// An executor that runs each body on `base`, `delay` after it is submitted: what `delay`'s
/// map runs on.
@usableFromInline
internal final class DelayingExecutor: SerialExecutorIdentity {
    /// What measures the delay and runs the bodies.
    @usableFromInline
    internal let base: any SchedulingExecutor

    /// How long after its submission each body runs.
    @usableFromInline
    internal let delay: Duration

    @usableFromInline
    internal init(base: any SchedulingExecutor, delay: Duration) {
        self.base = base
        self.delay = delay
    }

    @usableFromInline
    internal func submit(_ body: @escaping @Sendable () -> Void) {
        base.submit(after: delay, body)
    }

    /// Whether the caller blocks `base`, so a wait for the delayed value could never end.
    @usableFromInline
    package var isBlockedByCaller: Bool {
        (base as? any SerialExecutorIdentity)?.isBlockedByCaller ?? false
    }
}
