public import Dispatch
public import Synchronization

/// What a ``WaiterRegistry``'s stack links: the part of a ``Waiter`` that is not generic, so
/// that the registry's `deinit`, which is never specialized, looks up no waiter type.
///
/// `@unchecked Sendable` is sound because `next` belongs to whoever owns the node in the
/// registry's stack (see ``ClosableStack``).
@usableFromInline
internal class WaiterNode: ChainNode, StackNode, @unchecked Sendable {
    /// The address bits of the next waiter in a ``WaiterRegistry``'s stack.
    @exclusivity(unchecked) @usableFromInline package var next: UInt = 0

    @usableFromInline
    override internal init() {}
}

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
/// to *finished*; `next` (in ``WaiterNode``) belongs to whoever owns the node in the
/// registry's stack.
@usableFromInline
internal class Waiter<Value: Sendable>: WaiterNode, @unchecked Sendable {
    /// *new*, *waiting* or *finished*.
    @usableFromInline
    internal let state: Atomic<UInt>

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

    override internal var traceIsPending: Bool {
        !isFinished
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

    override internal var traceKind: TraceNodeKind {
        .thread
    }

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

/// The parties waiting for one storage's value that may give up: tasks in the cancellable
/// ``FutureProtocol/get()`` and threads in a blocking `wait(until:)` with a deadline.
///
/// They are kept apart from the storage's other handlers because a waiter that gives up must
/// be able to leave: the storage's handler list keeps strict order and is never edited, while
/// the order in which waiters wake does not matter, which lets this list drop finished
/// waiters freely. A storage makes one of these on the first such wait and adds it as a
/// single link handler; when the value arrives, the link delivers it to every waiter.
///
/// The waiters sit on a ``ClosableStack``, closed once the value has arrived. Waiters are
/// counted, and when waiters that gave up make up half of them, the one giving up compacts
/// the stack: it takes every node, releases the finished ones and pushes the rest back. A
/// compaction that finds the stack closed when it pushes back delivers to the survivors
/// itself, with the value stored before closing. So memory stays proportional to the live
/// waiters, however many gave up, and a lone waiter that gives up leaves nothing behind. Each
/// compaction removes at least half of what it scans, so giving up costs O(1) amortized; the
/// one waiter that compacts pays for the scan, O(n) in the live waiters (a timed-out wait
/// among 100,000 waiting tasks returned 26 ms late in a debug build). A compaction skipped
/// because another is running leaves its waiter for the next one.
///
/// `@unchecked Sendable` is sound because `value` is written once, before the releasing
/// exchange that closes the stack, and read only after an acquiring operation sees it closed
/// (a compaction's failed push-back); the stack hands each node to one party at a time.
@usableFromInline
internal final class WaiterRegistry<Value: Sendable>: SideRegistry, @unchecked Sendable {
    /// The waiters, each a ``Waiter`` of `Value`.
    @usableFromInline
    internal let stack = ClosableStack<WaiterNode>()
    private let registered = Atomic<Int>(0)
    private let cancelled = Atomic<Int>(0)
    private let isCompacting = Atomic<Bool>(false)
    private let scanned = Atomic<Int>(0)

    @exclusivity(unchecked)
    @usableFromInline
    internal var value: Value?

    @inlinable
    override internal init() {}

    /// The attempt's consumer links, if it made them.
    @inlinable
    internal var existingConsumerLinks: ConsumerLinks<Value>? {
        let bits = consumerLinksBits.load(ordering: .acquiring)
        // The bits are always those of this registry's `ConsumerLinks<Value>`.
        return bits == 0 ? nil : RetainedBits.borrow(bits, as: ConsumerLinks<Value>.self)
    }

    /// The attempt's consumer links, made on first use.
    @inlinable
    internal func consumerLinks() -> ConsumerLinks<Value> {
        if let existing = existingConsumerLinks {
            return existing
        }
        let made = ConsumerLinks<Value>()
        let bits = RetainedBits.retain(made as AnyConsumerLinks)
        guard consumerLinksBits.update({ $0 == 0 ? bits : nil }).updated else {
            RetainedBits.release(bits, as: AnyConsumerLinks.self)
            return existingConsumerLinks.unsafelyUnwrapped
        }
        return made
    }

    /// The link step that the storage's handler runs when the value arrives.
    @inlinable
    internal static func resumeAll(_ node: ChainNode, _ value: Value, _ queue: inout DrainQueue) {
        WaiterRegistry.linked(node).resumeAll(with: value)
    }

    /// How many waiters the stack holds, finished ones included, until the value arrives.
    @usableFromInline
    internal var count: Int {
        registered.load(ordering: .relaxed)
    }

    /// How many waiters compactions have looked at so far: the cost of giving up, which the
    /// tests check stays linear.
    internal var waitersScanned: Int {
        scanned.load(ordering: .relaxed)
    }

    /// Adds `waiter`; returns `false` if the value is already here, in which case the caller
    /// resumes the waiter itself.
    @usableFromInline
    internal func add(_ waiter: Waiter<Value>) -> Bool {
        if let tracedSource {
            PendingFutures.linked(waiter, to: tracedSource)
        }
        registered.add(1, ordering: .relaxed)
        guard stack.push(waiter) != .closed else {
            registered.subtract(1, ordering: .relaxed)
            return false
        }
        // A task cancelled between installing its continuation and this push has counted its
        // give-up already, when there was nothing here to drop; drop it now.
        if waiter.isFinished {
            compact()
        }
        return true
    }

    /// Counts a waiter that gave up after it was added, and compacts once such waiters make up
    /// half of all.
    @usableFromInline
    internal func waiterGaveUp() {
        let cancelledCount = cancelled.add(1, ordering: .relaxed).newValue
        if cancelledCount * 2 >= registered.load(ordering: .relaxed) {
            compact()
        }
    }

    /// Delivers `value` to every waiter and closes the stack.
    @inlinable
    internal func resumeAll(with value: Value) {
        self.value = value
        resume(stack.closeAndTakeAll(), with: value)
    }

    /// Releases the finished waiters and puts the others back.
    private func compact() {
        guard !isCompacting.exchange(true, ordering: .acquiring) else {
            return  // Another task is compacting; it will see this waiter too, or the next will.
        }
        defer { isCompacting.store(false, ordering: .releasing) }
        // Keep the live waiters in a private chain, releasing the cancelled ones.
        var taken = stack.takeAll()
        var survivors = NodeChain<WaiterNode>(head: 0)
        var lastSurvivor: WaiterNode?
        var removed = 0
        var survivorCount = 0
        while let node = taken.popFirst() {
            let waiter = unsafeDowncast(node, to: Waiter<Value>.self)
            if waiter.isFinished {
                removed += 1
            } else {
                survivorCount += 1
                waiter.next = survivors.head
                survivors.head = RetainedBits.retain(waiter)
                lastSurvivor = lastSurvivor ?? waiter
            }
        }
        scanned.add(removed + survivorCount, ordering: .relaxed)
        registered.subtract(removed, ordering: .relaxed)
        cancelled.subtract(removed, ordering: .relaxed)
        // Push the survivors back under whatever arrived meanwhile, unless the value did: then
        // the failed push-back's acquiring load makes `value` visible here.
        if let lastSurvivor, !stack.pushBack(survivors, last: lastSurvivor) {
            lastSurvivor.next = 0
            resume(survivors, with: value.unsafelyUnwrapped)
        }
    }

    /// Delivers `value` to, and releases, the waiters of `waiters`.
    @inlinable
    internal func resume(_ waiters: NodeChain<WaiterNode>, with value: Value) {
        var waiters = waiters
        while let waiter = waiters.popFirst() {
            unsafeDowncast(waiter, to: Waiter<Value>.self).resume(returning: value)
        }
    }
}

/// The part of a ``WaiterRegistry`` that is not generic: where an attempt keeps its
/// ``ConsumerLinks``, so that a consumer leaving finds them without any generic metadata.
///
/// The links are kept in this side object, which only some storages make, so that an attempt
/// node grows by no field for them.
@usableFromInline
internal class SideRegistry: ChainNode, @unchecked Sendable {
    /// The address bits of the attempt's ``ConsumerLinks``, retained, or zero until its second
    /// consumer comes.
    @usableFromInline
    internal let consumerLinksBits: Atomic<UInt> = Atomic(0)

    /// The storage whose registry this is, if ``PendingFutures`` recorded it when it made the
    /// registry: the waiters added here are reported to it.
    ///
    /// Unowned: the storage owns its registry, and a waiter is added only by a caller that holds
    /// the storage. Written once, before the registry is published to other threads.
    @usableFromInline
    @exclusivity(unchecked) internal unowned(unsafe) var tracedSource: ChainNode? = nil

    @usableFromInline
    override internal init() {}

    deinit {
        let bits = consumerLinksBits.load(ordering: .acquiring)
        if bits != 0 {
            RetainedBits.release(bits, as: AnyConsumerLinks.self)
        }
    }

    /// The consumer links, if made, without their type.
    @inlinable
    internal var anyConsumerLinks: AnyConsumerLinks? {
        let bits = consumerLinksBits.load(ordering: .acquiring)
        return bits == 0 ? nil : RetainedBits.borrow(bits, as: AnyConsumerLinks.self)
    }
}
