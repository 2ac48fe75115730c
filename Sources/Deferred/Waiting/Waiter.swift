public import Synchronization

/// One party waiting for a storage's value: a task in `get()` (``AsyncWaiter``) or a thread in
/// a blocking `wait(until:)` (``BlockingWaiter``), in the storage's ``WaiterRegistry`` if it may
/// give up, or else linked to the storage as a handler of its own.
///
/// A waiter is *waiting* once it can be delivered to, and becomes *finished* exactly once:
/// with the value, or without it when its task is cancelled or its wait times out. The
/// compare-and-swap that finishes it decides which, so the value is delivered at most once,
/// and never to a waiter that gave up. The registry drops finished waiters.
///
/// `@unchecked Sendable` is sound because the subclasses' state is written before the
/// releasing step to *waiting* and read only by the one party whose acquiring step moves it
/// to *finished*; `next` belongs to whoever owns the node in the registry's stack.
@usableFromInline
internal class Waiter<Value: Sendable>: ChainNode, StackNode, @unchecked Sendable {
    /// *new*, *waiting* or *finished*.
    @usableFromInline
    internal let state: Atomic<UInt>

    /// The address bits of the next waiter in a ``WaiterRegistry``'s stack.
    @exclusivity(unchecked)
    @usableFromInline
    package var next: UInt = 0

    @usableFromInline
    internal static var new: UInt { 0 }

    @usableFromInline
    internal static var waiting: UInt { 1 }

    @usableFromInline
    internal static var finished: UInt { 2 }

    @usableFromInline
    internal init(state: UInt) {
        self.state = Atomic(state)
        super.init()
    }

    /// Whether the waiter has had the value or gave up.
    @usableFromInline
    internal final var isFinished: Bool {
        state.load(ordering: .acquiring) == Waiter.finished
    }

    /// Delivers `value`, unless the waiter finished already.
    @usableFromInline
    internal final func resume(returning value: Value) {
        if state.compareExchange(expected: Waiter.waiting, desired: Waiter.finished, ordering: .acquiringAndReleasing)
            .exchanged
        {
            deliver(value)
        }
    }

    /// Finishes the waiter without the value, unless it finished already; returns the state
    /// it was in and whether this call finished it.
    @usableFromInline
    internal final func giveUp() -> (observed: UInt, finished: Bool) {
        let (observed, finished) = state.update { $0 == Waiter.finished ? nil : Waiter.finished }
        return (observed, finished)
    }

    /// Hands the value to the waiting party; called once, by the call that finished it.
    @usableFromInline
    internal func deliver(_ value: Value) {
        preconditionFailure("a Waiter subclass delivers the value")
    }
}
