public import Dispatch
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
    @exclusivity(unchecked) @usableFromInline package var next: UInt = 0

    @usableFromInline internal static var new: UInt { 0 }
    @usableFromInline internal static var waiting: UInt { 1 }
    @usableFromInline internal static var finished: UInt { 2 }

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

/// A thread blocked in `wait(until:)` on an unfilled storage, asleep on a semaphore until the
/// value arrives or its deadline passes.
///
/// It is *waiting* from the start. The value's delivery signals the semaphore; a wait that
/// times out gives up instead, and whichever finishes the waiter first decides the outcome.
/// A waiter that gave up is counted as cancelled in the registry, which then drops it.
@usableFromInline
internal final class BlockingWaiter<Value: Sendable>: Waiter<Value>, @unchecked Sendable {
    private let woken = DispatchSemaphore(value: 0)

    @usableFromInline
    internal init() {
        super.init(state: Waiter<Value>.waiting)
    }

    /// Sleeps until the value was delivered (`true`) or `time` passed (`false`); after `false`,
    /// the waiter has given up and nothing will be delivered to it.
    @usableFromInline
    internal func sleep(until time: DispatchTime) -> Bool {
        if woken.wait(timeout: time) == .success {
            return true
        }
        // Timed out; unless the value won the race to finish the waiter, give up. If it won,
        // its signal is on the way and the value is already visible.
        return !giveUp().finished
    }

    @usableFromInline
    override internal func deliver(_ value: Value) {
        woken.signal()
    }

    /// Wakes the waiter when its link is dropped unrun: the storage was orphaned, and the
    /// sleeper finds it so.
    @usableFromInline
    override internal func lostDecider(to nodes: inout ReleaseStack) {
        woken.signal()
    }

    /// The link step of a waiter linked to the storage as a handler: a wait without a
    /// deadline, which never gives up and so needs no registry.
    @usableFromInline
    internal static func wake(_ node: ChainNode, _ value: Value, _ queue: inout DrainQueue) {
        BlockingWaiter.linked(node).resume(returning: value)
    }
}
