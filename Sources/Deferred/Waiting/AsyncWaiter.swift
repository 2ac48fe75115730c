import Synchronization

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

    @usableFromInline
    override internal func deliver(_ value: Value) {
        continuation.unsafelyUnwrapped.resume(returning: value)
    }
}
