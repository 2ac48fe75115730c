import Synchronization

extension FutureProtocol {
    /// The value, once the future is filled; the awaiting task suspends until then without
    /// blocking a thread.
    ///
    /// ```swift
    /// let profile = await service.profile(for: id).value
    /// ```
    ///
    /// The task resumes exactly once, on its own executor. Awaiting a future that is never
    /// filled never returns, even if the task is cancelled; use ``get()`` to stop waiting when
    /// the task is cancelled.
    @inlinable
    nonisolated(nonsending)
        public var value: Value
    {
        // Inlinable, so that it is specialized for the future's type where it is awaited: the
        // handler then runs in place, without a closure or an executor's submit around it.
        get async {
            if let value = peek() {
                return value
            }
            return await withUnsafeContinuation { continuation in
                upon(.immediate) { continuation.resume(returning: $0) }
            }
        }
    }

    /// Returns the value once the future is filled, or throws `CancellationError` as soon as
    /// the awaiting task is cancelled.
    ///
    /// ```swift
    /// do {
    ///     let results = try await search.results(for: query).get()
    ///     show(results)
    /// } catch {
    ///     // The user typed another letter and this task was cancelled.
    /// }
    /// ```
    ///
    /// A cancelled waiter leaves a `Deferred` or `Future`: tasks that give up waiting on one
    /// that is filled much later (or never) do not pile up in memory. Other futures can only be
    /// watched with `upon`, so there a cancelled waiter's small handler stays until the value
    /// arrives, and then does nothing. The value itself is unaffected; other readers still get
    /// it.
    ///
    /// - Returns: The value.
    /// - Throws: `CancellationError` if the task is cancelled before the value arrives.
    nonisolated(nonsending)
        public func get() async throws(CancellationError) -> Value
    {
        try await value(awaitedBy: AsyncWaiter<Value>())
    }

    /// Returns the value once the future is filled, delivered through `waiter`, or throws
    /// `CancellationError` as soon as the awaiting task is cancelled; see ``get()``.
    ///
    /// A subclass of ``AsyncWaiter`` can act on the value as it is delivered, on the thread that
    /// fills the future, before the task resumes.
    @usableFromInline
    nonisolated(nonsending)
        internal func value(awaitedBy waiter: AsyncWaiter<Value>) async throws(CancellationError) -> Value
    {
        if let value = peek() {
            return value
        }
        let waiters = self.waiters
        do {
            return try await withTaskCancellationHandler {
                try await withUnsafeThrowingContinuation { continuation in
                    guard waiter.install(continuation) else {
                        return
                    }
                    if let waiters {
                        if !waiters.add(waiter) {
                            waiter.resume(returning: peek().unsafelyUnwrapped)
                        }
                    } else {
                        // Another kind of future: the handler stays until the fill, but a
                        // cancelled waiter ignores it.
                        upon(ImmediateExecutor.shared) { waiter.resume(returning: $0) }
                    }
                }
            } onCancel: {
                if waiter.cancel() {
                    waiters?.waiterGaveUp()
                }
            }
        } catch {
            throw CancellationError()
        }
    }
}

/// A task awaiting a value through the cancellable ``FutureProtocol/get()``: its continuation,
/// resumed exactly once, by whichever comes first of the value and the task's cancellation.
///
/// It goes from *new* to *waiting* when the continuation is installed. Cancellation that comes
/// before that finishes the waiter early, and installing then resumes the continuation with
/// the error at once; such a waiter never enters the registry, so it is not counted there as
/// a cancelled waiter (counting it made every later cancellation rescan the live waiters).
///
/// `@unchecked Sendable` is sound because `continuation` is written once, before the
/// releasing compare-and-swap to *waiting*, and read only by the one party whose acquiring
/// compare-and-swap moves *waiting* to *finished*.
@usableFromInline
internal class AsyncWaiter<Value: Sendable>: Waiter<Value>, @unchecked Sendable {
    @exclusivity(unchecked)
    private var continuation: UnsafeContinuation<Value, any Error>?

    @usableFromInline
    internal init() {
        super.init(state: Waiter<Value>.new)
    }

    /// Installs the continuation to resume; if the task was cancelled already, resumes it at
    /// once with `CancellationError` and returns `false`.
    @usableFromInline
    internal final func install(_ continuation: UnsafeContinuation<Value, any Error>) -> Bool {
        self.continuation = continuation
        let (exchanged, _) = state.compareExchange(
            expected: Waiter<Value>.new,
            desired: Waiter<Value>.waiting,
            ordering: .acquiringAndReleasing
        )
        if !exchanged {
            continuation.resume(throwing: CancellationError())
        }
        return exchanged
    }

    /// Resumes the task with `CancellationError`, unless it was resumed already; returns
    /// whether this call cancelled an installed waiter, one the registry may hold.
    @usableFromInline
    internal final func cancel() -> Bool {
        let (observed, finished) = giveUp()
        guard finished && observed == Waiter<Value>.waiting else {
            return false
        }
        continuation.unsafelyUnwrapped.resume(throwing: CancellationError())
        return true
    }

    override internal var traceKind: TraceNodeKind {
        .task
    }

    @usableFromInline
    override internal func deliver(_ value: Value) {
        continuation.unsafelyUnwrapped.resume(returning: value)
    }
}
