import Synchronization

/// The tasks awaiting one storage's value through the cancellable ``FutureProtocol/get()``.
///
/// They are kept apart from the storage's other handlers because a cancelled task must be
/// able to leave: the storage's handler list keeps strict order and is never edited, while
/// the order in which waiting tasks resume does not matter, which lets this list drop
/// cancelled waiters freely. A storage makes one of these on the first `get()` and adds it
/// as a single link handler; when the value arrives, the link resumes every waiter.
///
/// The waiters sit on a ``ClosableStack``, closed once the value has arrived. Waiters are
/// counted, and when cancelled waiters make up half of
/// them (and at least eight), the cancelling task compacts the stack: it takes every node,
/// releases the cancelled ones and pushes the rest back. A compaction that finds the stack
/// closed when it pushes back resumes the survivors itself, with the value stored before
/// closing. So memory stays proportional to the live waiters, however many were cancelled.
///
/// `@unchecked Sendable` is sound because `value` is written once, before the releasing
/// exchange that closes the stack, and read only after an acquiring operation sees it closed
/// (a compaction's failed push-back); the stack hands each node to one party at a time.
@usableFromInline
internal final class AsyncWaiters<Value: Sendable>: ChainNode, @unchecked Sendable {
    private let stack = ClosableStack<AsyncWaiter<Value>>()
    private let registered = Atomic<Int>(0)
    private let cancelled = Atomic<Int>(0)
    private let isCompacting = Atomic<Bool>(false)

    @exclusivity(unchecked)
    private var value: Value?

    @usableFromInline
    override internal init() {}

    /// The link step that the storage's handler runs when the value arrives.
    @usableFromInline
    internal static func resumeAll(_ node: ChainNode, _ value: Value, _ queue: inout DrainQueue) {
        AsyncWaiters.linked(node).resumeAll(with: value)
    }

    /// How many waiters the stack holds, cancelled ones included, until the value arrives.
    @usableFromInline
    internal var count: Int {
        registered.load(ordering: .relaxed)
    }

    /// Adds `waiter`; returns `false` if the value is already here, in which case the caller
    /// resumes the waiter itself.
    @usableFromInline
    internal func add(_ waiter: AsyncWaiter<Value>) -> Bool {
        registered.add(1, ordering: .relaxed)
        guard stack.push(waiter) != .closed else {
            registered.subtract(1, ordering: .relaxed)
            return false
        }
        return true
    }

    /// Counts a cancelled waiter, and compacts once cancelled waiters make up half of all.
    @usableFromInline
    internal func waiterWasCancelled() {
        let cancelledCount = cancelled.add(1, ordering: .relaxed).newValue
        if cancelledCount >= 8 && cancelledCount * 2 >= registered.load(ordering: .relaxed) {
            compact()
        }
    }

    /// Resumes every waiter with `value` and closes the stack.
    private func resumeAll(with value: Value) {
        self.value = value
        resume(stack.closeAndTakeAll(), with: value)
    }

    /// Releases the cancelled waiters and puts the others back.
    private func compact() {
        guard !isCompacting.exchange(true, ordering: .acquiring) else {
            return  // Another task is compacting; it will see this waiter too, or the next will.
        }
        defer { isCompacting.store(false, ordering: .releasing) }
        // Keep the live waiters in a private chain, releasing the cancelled ones.
        var taken = stack.takeAll()
        var survivors = NodeChain<AsyncWaiter<Value>>(head: 0)
        var lastSurvivor: AsyncWaiter<Value>?
        var removed = 0
        while let waiter = taken.popFirst() {
            if waiter.isFinished {
                removed += 1
            } else {
                waiter.next = survivors.head
                survivors.head = RetainedBits.retain(waiter)
                lastSurvivor = lastSurvivor ?? waiter
            }
        }
        registered.subtract(removed, ordering: .relaxed)
        cancelled.subtract(removed, ordering: .relaxed)
        // Push the survivors back under whatever arrived meanwhile, unless the value did: then
        // the failed push-back's acquiring load makes `value` visible here.
        if let lastSurvivor, !stack.pushBack(survivors, last: lastSurvivor) {
            lastSurvivor.next = 0
            resume(survivors, with: value.unsafelyUnwrapped)
        }
    }

    /// Resumes, and releases, the waiters of `waiters`.
    private func resume(_ waiters: NodeChain<AsyncWaiter<Value>>, with value: Value) {
        var waiters = waiters
        while let waiter = waiters.popFirst() {
            waiter.resume(returning: value)
        }
    }
}
