import Synchronization

/// The tasks awaiting one storage's value through the cancellable ``FutureProtocol/get()``.
///
/// They are kept apart from the storage's other handlers because a cancelled task must be
/// able to leave: the storage's handler list keeps strict order and is never edited, while
/// the order in which waiting tasks resume does not matter, which lets this list drop
/// cancelled waiters freely. A storage makes one of these on the first `get()` and adds it
/// as a single link handler; when the value arrives, the link resumes every waiter.
///
/// The stack word holds the address of the newest waiter node, with bit 0 set once the value
/// has arrived (*closed*). Waiters are counted, and when cancelled waiters make up half of
/// them (and at least eight), the cancelling task compacts the stack: it takes every node,
/// releases the cancelled ones and pushes the rest back. A compaction that finds the stack
/// closed when it pushes back resumes the survivors itself, with the value stored before
/// closing. So memory stays proportional to the live waiters, however many were cancelled.
///
/// `@unchecked Sendable` is sound because `value` is written once, before the releasing
/// exchange that closes the stack, and read only after an acquiring operation sees it
/// closed; the nodes are owned by one party at a time, as in ``AtomicStack``-style stacks:
/// their pusher until the releasing compare-and-swap, then whoever takes them with an
/// acquiring exchange.
@usableFromInline
internal final class AsyncWaiters<Value: Sendable>: ChainNode, @unchecked Sendable {
    private let stack = Atomic<UInt>(0)
    private let registered = Atomic<Int>(0)
    private let cancelled = Atomic<Int>(0)
    private let isCompacting = Atomic<Bool>(false)

    @exclusivity(unchecked)
    private var value: Value?

    private static var closedBit: UInt { 1 }

    @usableFromInline
    override internal init() {}

    deinit {
        releaseNodes(stack.exchange(0, ordering: .acquiring) & ~Self.closedBit)
    }

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
        let bits = UInt(bitPattern: Unmanaged.passRetained(waiter).toOpaque())
        var observed = stack.load(ordering: .relaxed)
        while observed & Self.closedBit == 0 {
            waiter.next = observed
            let (exchanged, original) = stack.compareExchange(
                expected: observed,
                desired: bits,
                successOrdering: .releasing,
                failureOrdering: .relaxed
            )
            if exchanged {
                return true
            }
            observed = original
        }
        Unmanaged<AsyncWaiter<Value>>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!).release()
        registered.subtract(1, ordering: .relaxed)
        return false
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
        let taken = stack.exchange(Self.closedBit, ordering: .acquiringAndReleasing)
        resume(taken, with: value)
    }

    /// Releases the cancelled waiters and puts the others back.
    private func compact() {
        guard !isCompacting.exchange(true, ordering: .acquiring) else {
            return  // Another task is compacting; it will see this waiter too, or the next will.
        }
        defer { isCompacting.store(false, ordering: .releasing) }
        var observed = stack.load(ordering: .acquiring)
        var taken: UInt = 0
        while observed & Self.closedBit == 0 && observed != 0 {
            let (exchanged, original) = stack.compareExchange(
                expected: observed,
                desired: 0,
                successOrdering: .acquiring,
                failureOrdering: .acquiring
            )
            if exchanged {
                taken = observed
                break
            }
            observed = original
        }
        guard taken != 0 else {
            return
        }
        // Keep the live waiters in a private list, releasing the cancelled ones.
        var survivors: UInt = 0
        var lastSurvivor: AsyncWaiter<Value>?
        var removed = 0
        var bits = taken
        while bits != 0 {
            let waiter = Unmanaged<AsyncWaiter<Value>>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!)
                .takeUnretainedValue()
            let next = waiter.next
            if waiter.isFinished {
                Unmanaged.passUnretained(waiter).release()
                removed += 1
            } else {
                waiter.next = survivors
                if survivors == 0 {
                    lastSurvivor = waiter
                }
                survivors = bits
            }
            bits = next
        }
        registered.subtract(removed, ordering: .relaxed)
        cancelled.subtract(removed, ordering: .relaxed)
        guard let lastSurvivor else {
            return
        }
        // Push the survivors back under whatever arrived meanwhile, unless the value did.
        observed = stack.load(ordering: .relaxed)
        while observed & Self.closedBit == 0 {
            lastSurvivor.next = observed
            let (exchanged, original) = stack.compareExchange(
                expected: observed,
                desired: survivors,
                successOrdering: .releasing,
                failureOrdering: .acquiring
            )
            if exchanged {
                return
            }
            observed = original
        }
        lastSurvivor.next = 0
        resume(survivors, with: value.unsafelyUnwrapped)
    }

    /// Resumes, and releases, the waiters of the list at `bits`.
    private func resume(_ bits: UInt, with value: Value) {
        var bits = bits & ~Self.closedBit
        while bits != 0 {
            let waiter = Unmanaged<AsyncWaiter<Value>>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!)
                .takeRetainedValue()
            bits = waiter.next
            waiter.resume(returning: value)
        }
    }

    private func releaseNodes(_ bits: UInt) {
        var bits = bits
        while bits != 0 {
            let waiter = Unmanaged<AsyncWaiter<Value>>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!)
                .takeRetainedValue()
            bits = waiter.next
        }
    }
}
