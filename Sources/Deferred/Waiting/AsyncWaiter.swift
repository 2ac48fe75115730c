import Synchronization

/// One task awaiting a value through the cancellable ``FutureProtocol/get()``: its
/// continuation, resumed exactly once, by whichever comes first of the value and the task's
/// cancellation.
///
/// The state goes from *new* to *waiting* when the continuation is installed, and from either
/// to *finished* exactly once: the compare-and-swap that finishes it decides who resumes the
/// continuation. Cancellation that comes before the continuation is installed finishes the
/// waiter early, and installing then resumes the continuation with the error at once.
///
/// `@unchecked Sendable` is sound because `continuation` is written once, before the
/// releasing compare-and-swap to *waiting*, and read only by the one party whose acquiring
/// compare-and-swap moves *waiting* to *finished*; `next` belongs to whoever owns the node in
/// an ``AsyncWaiters`` stack.
@usableFromInline
internal final class AsyncWaiter<Value: Sendable>: StackNode, @unchecked Sendable {
    private let state = Atomic<UInt>(AsyncWaiter.new)

    @exclusivity(unchecked)
    private var continuation: UnsafeContinuation<Value, any Error>?

    /// The address bits of the next waiter in an ``AsyncWaiters`` stack.
    @exclusivity(unchecked)
    @usableFromInline
    package var next: UInt = 0

    private static var new: UInt { 0 }
    private static var waiting: UInt { 1 }
    private static var finished: UInt { 2 }

    @usableFromInline
    internal init() {}

    /// Whether the waiter has been resumed or cancelled.
    @usableFromInline
    internal var isFinished: Bool {
        state.load(ordering: .acquiring) == AsyncWaiter.finished
    }

    /// Installs the continuation to resume; if the task was cancelled already, resumes it at
    /// once with `CancellationError` and returns `false`.
    @usableFromInline
    internal func install(_ continuation: UnsafeContinuation<Value, any Error>) -> Bool {
        self.continuation = continuation
        let (exchanged, _) = state.compareExchange(
            expected: AsyncWaiter.new,
            desired: AsyncWaiter.waiting,
            ordering: .acquiringAndReleasing
        )
        if !exchanged {
            continuation.resume(throwing: CancellationError())
        }
        return exchanged
    }

    /// Resumes the task with `value`, unless it was resumed or cancelled already.
    @usableFromInline
    internal func resume(returning value: Value) {
        if finish() {
            continuation.unsafelyUnwrapped.resume(returning: value)
        }
    }

    /// Resumes the task with `CancellationError`, unless it was resumed already; returns
    /// whether this call cancelled it.
    @usableFromInline
    internal func cancel() -> Bool {
        let (observed, finished) = state.update { observed in
            observed == AsyncWaiter.finished ? nil : AsyncWaiter.finished
        }
        if finished && observed == AsyncWaiter.waiting {
            continuation.unsafelyUnwrapped.resume(throwing: CancellationError())
        }
        return finished
    }

    /// Moves a waiting waiter to finished; returns whether this call did.
    private func finish() -> Bool {
        state.compareExchange(
            expected: AsyncWaiter.waiting,
            desired: AsyncWaiter.finished,
            ordering: .acquiringAndReleasing
        ).exchanged
    }
}
