public import Dispatch
public import Synchronization

/// Mutual exclusion for a dictionary: of a ``SharedTable``, and of the ``DeadlineLedger``.
///
/// Sharing a run by key means finding or inserting the key in a dictionary, which a lock-free
/// design could do only with a concurrent hash map and safe memory reclamation. The table holds
/// this lock for a dictionary operation and a few atomic steps: some tens of nanoseconds. No
/// future is filled and no run, result or key is released while it is held; the only user code
/// that runs then is the key's hashing and equality. The deadline ledger keeps its records the
/// same way, and runs no user code under it.
///
/// It counts its holder and waiters in one atomic word: an uncontended `lock` and `unlock` are
/// one atomic read-modify-write each; a thread that finds the lock held parks on a semaphore
/// until the holder hands it over. The handover goes through the atomic word too (an acquiring
/// load after waking), so ThreadSanitizer sees every ordering the lock gives, which it would not
/// see through `Synchronization.Mutex` on Linux.
@usableFromInline
internal struct TableLock: ~Copyable {
    /// The holder and the waiters: zero when free.
    @usableFromInline
    internal let claims = Atomic<Int>(0)

    /// Where waiters park; signalled once per handover.
    @usableFromInline
    internal let handover = DispatchSemaphore(value: 0)

    @inlinable
    internal init() {}

    /// Runs `body` while holding the lock; `body` must not take it again.
    @inlinable
    internal func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        if claims.wrappingAdd(1, ordering: .acquiring).oldValue > 0 {
            handover.wait()
            // The holder that handed over released through `claims`; acquire its writes there.
            _ = claims.load(ordering: .acquiring)
        }
        defer {
            if claims.wrappingSubtract(1, ordering: .releasing).oldValue > 1 {
                handover.signal()
            }
        }
        return try body()
    }
}
