public import Deferred
import Synchronization

/// A test executor with its own clock: scheduled work runs only when the test advances time.
///
/// Timeouts, delays and retries are tested instantly and deterministically: nothing waits
/// for real time, and work due at the same instant runs in the order it was submitted.
///
/// ```swift
/// let clock = VirtualTimeExecutor()
/// let reply = Deferred<Int>()
/// let limited = reply.timeout(after: .seconds(5), on: clock, substituting: -1)
/// clock.advance(by: .seconds(4))   // not yet
/// clock.advance(by: .seconds(1))   // limited.peek() == -1
/// ```
///
/// `submit(_:)` schedules a body for the current virtual time, so it too runs at the next
/// ``advance(by:)`` (`advance(by: .zero)` runs just the work that is due). Time has nanosecond
/// resolution. Call `advance(by:)` from one thread at a time, typically the test's.
///
/// Scheduling a body and taking the next one due are O(log n) in the number pending: they wait
/// in a binary heap ordered by due time, then by submission.
public final class VirtualTimeExecutor: SchedulingExecutor {
    private let scheduled = Locked(Schedule())
    private let nanoseconds = Atomic<Int>(0)
    private let isAdvancing = Atomic<Bool>(false)

    /// A body and when it is due.
    private struct Scheduled: Sendable {
        let due: Int
        let sequence: Int
        let body: @Sendable () -> Void

        func precedes(_ other: Scheduled) -> Bool {
            (due, sequence) < (other.due, other.sequence)
        }
    }

    /// The pending bodies, earliest first by ``Scheduled/precedes(_:)``, and the next
    /// submission number.
    private struct Schedule: Sendable {
        var heap = BinaryHeap<Scheduled> { $0.precedes($1) }
        var nextSequence = 0

        mutating func insert(due: Int, _ body: @escaping @Sendable () -> Void) {
            heap.insert(Scheduled(due: due, sequence: nextSequence, body: body))
            nextSequence += 1
        }

        /// Takes the earliest body if it is due by `end`.
        mutating func popFirst(dueBy end: Int) -> Scheduled? {
            guard let first = heap.first, first.due <= end else {
                return nil
            }
            return heap.popFirst()
        }
    }

    /// Creates an executor whose clock reads zero.
    public init() {}

    /// How much virtual time has passed since the executor was created.
    public var now: Duration {
        .nanoseconds(nanoseconds.load(ordering: .acquiring))
    }

    /// Whether any body is scheduled and has not run yet.
    public var hasPendingWork: Bool {
        scheduled.withLock { !$0.heap.isEmpty }
    }

    /// Schedules `body` for the current virtual time; it runs at the next ``advance(by:)``.
    public func submit(_ body: @escaping @Sendable () -> Void) {
        schedule(at: nanoseconds.load(ordering: .acquiring), body)
    }

    /// Schedules `body` to run once the clock has advanced by `delay`.
    ///
    /// - Parameters:
    ///   - delay: How much virtual time must pass first.
    ///   - body: The work to run.
    public func submit(after delay: Duration, _ body: @escaping @Sendable () -> Void) {
        let (due, overflow) = nanoseconds.load(ordering: .acquiring).addingReportingOverflow(delay.clampedNanoseconds)
        schedule(at: overflow ? .max : due, body)
    }

    /// Moves the clock forward by `duration`, running every body that falls due on the way, in
    /// order of due time and then of submission.
    ///
    /// While a body runs, ``now`` reads its due time; bodies it schedules within the window run
    /// too. Afterwards ``now`` reads the old time plus `duration`.
    ///
    /// - Parameter duration: How far to move the clock; must not be negative.
    public func advance(by duration: Duration) {
        precondition(duration >= .zero, "VirtualTimeExecutor cannot move back in time")
        precondition(
            !isAdvancing.exchange(true, ordering: .acquiringAndReleasing),
            "VirtualTimeExecutor.advance(by:) was called while it was already advancing"
        )
        defer { isAdvancing.store(false, ordering: .releasing) }
        let (target, overflow) = nanoseconds.load(ordering: .acquiring).addingReportingOverflow(
            duration.clampedNanoseconds)
        let end = overflow ? Int.max : target
        while let next = scheduled.withLock({ $0.popFirst(dueBy: end) }) {
            nanoseconds.store(next.due, ordering: .releasing)
            next.body()
        }
        nanoseconds.store(end, ordering: .releasing)
    }

    private func schedule(at due: Int, _ body: @escaping @Sendable () -> Void) {
        scheduled.withLock { $0.insert(due: due, body) }
    }
}
