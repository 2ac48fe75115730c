public import Synchronization

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
    private let stack = ClosableStack<Waiter<Value>>()
    private let registered = Atomic<Int>(0)
    private let cancelled = Atomic<Int>(0)
    private let isCompacting = Atomic<Bool>(false)
    private let scanned = Atomic<Int>(0)

    @exclusivity(unchecked)
    private var value: Value?

    @usableFromInline
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
    @usableFromInline
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
    private func resumeAll(with value: Value) {
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
        var survivors = NodeChain<Waiter<Value>>(head: 0)
        var lastSurvivor: Waiter<Value>?
        var removed = 0
        var survivorCount = 0
        while let waiter = taken.popFirst() {
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
    private func resume(_ waiters: NodeChain<Waiter<Value>>, with value: Value) {
        var waiters = waiters
        while let waiter = waiters.popFirst() {
            waiter.resume(returning: value)
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
