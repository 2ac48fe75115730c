public import Dispatch
public import Synchronization

/// A lock for critical sections of a few hundred instructions: it spins a little while the
/// holder is running, then sleeps, so a holder that the system has descheduled costs the
/// others nothing (a pure spin lock, fair or not, stalled for seconds once threads outnumbered
/// cores).
///
/// The word is 0 when free, 1 when held, and 2 when held with a thread asleep or about to
/// sleep. Taking it is a compare-and-swap from 0 to 1, or an exchange to 2 that finds 0;
/// releasing is an exchange to 0, which wakes a sleeper if it finds 2. Every waker's signal
/// is counted by the semaphore, so no wake-up is lost; a woken thread that finds the lock taken
/// again sleeps again. The releasing exchange and the acquiring operation that takes the lock
/// next order each holder's accesses after the previous holder's, which ThreadSanitizer
/// understands, unlike `Synchronization.Mutex` on this toolchain; the semaphore only puts
/// threads to sleep.
@usableFromInline
internal struct SleepingLock: ~Copyable {
    @usableFromInline
    internal let word = Atomic<UInt>(0)

    /// Where waiting threads sleep.
    @usableFromInline
    internal let sleepers = DispatchSemaphore(value: 0)

    @inlinable
    internal init() {}

    /// Runs `body` alone.
    @inlinable
    internal func withLock<Result>(_ body: () -> Result) -> Result {
        lock()
        defer { unlock() }
        return body()
    }

    @usableFromInline
    internal func lock() {
        for _ in 0..<100 where word.update({ $0 == 0 ? 1 : nil }).updated {
            return
        }
        while word.exchange(2, ordering: .acquiring) != 0 {
            sleepers.wait()
        }
    }

    @usableFromInline
    internal func unlock() {
        if word.exchange(0, ordering: .releasing) == 2 {
            sleepers.signal()
        }
    }
}
