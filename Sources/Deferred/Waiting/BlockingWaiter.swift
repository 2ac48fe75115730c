public import Dispatch

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
