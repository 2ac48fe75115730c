public import Synchronization

/// A fair spin lock for critical sections of a few hundred instructions: threads enter in the
/// order they arrive, so none can wait behind an endless stream of later arrivals (a plain
/// test-and-set spin lock starved one thread for seconds under 32-thread contention).
///
/// It is two counters: taking a ticket is one atomic increment, and the holder of the ticket
/// being served enters. The releasing store that serves the next ticket and the acquiring load
/// that sees it order each holder's accesses after the previous holder's, which
/// ThreadSanitizer understands, unlike `Synchronization.Mutex` on this toolchain.
@usableFromInline
internal struct TicketLock: ~Copyable {
    /// The next ticket to hand out.
    @usableFromInline
    internal let nextTicket = Atomic<UInt>(0)

    /// The ticket allowed in.
    @usableFromInline
    internal let serving = Atomic<UInt>(0)

    @inlinable
    internal init() {}

    /// Runs `body` once every thread that arrived earlier has left, and alone.
    @inlinable
    internal func withLock<Result>(_ body: () -> Result) -> Result {
        let ticket = nextTicket.wrappingAdd(1, ordering: .relaxed).oldValue
        while serving.load(ordering: .acquiring) != ticket {}
        defer { serving.store(ticket &+ 1, ordering: .releasing) }
        return body()
    }
}
