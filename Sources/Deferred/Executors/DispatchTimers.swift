public import Dispatch
public import Synchronization

/// Every delayed body of every Dispatch queue (`submit(after:)`, and through it `timeout`,
/// `delay` and `retry`'s backoff), kept in one heap of deadlines and served by one Dispatch timer.
///
/// `asyncAfter` makes a Dispatch timer source per call and re-arms the kernel timer each time,
/// which made timers the largest cost of a busy service (see the Performance guide, the gateway).
/// Here scheduling a body costs one allocation of its own and a push onto a lock-free stack; the kernel timer
/// is re-armed only when the new deadline comes before the one it is armed for. A body that is
/// withdrawn (a time limit whose attempt finished first) is released at once and skipped when
/// its deadline comes, without a hop to its queue.
///
/// What the heap guarantees, as `asyncAfter` does: a body runs once, on its queue, no sooner than
/// its deadline on the uptime clock, and as soon after it as a wake-up can: the timer is armed
/// for the earliest deadline exactly, without leeway, because a time limit's lateness is latency
/// its caller sees (the Performance guide measures it against `asyncAfter`, "Limits on time").
/// Deadlines coalesce only where nobody can tell: a wake-up hands over every body that is due by
/// then. Bodies whose deadlines have passed are handed to their queues in deadline order, and in
/// scheduling order for equal deadlines.
///
/// The design is a pure hand-over: the pending stack (``ClosableStack``) takes new timers from
/// any thread; only the service queue moves them into the heap, runs the ones that are due and
/// arms the timer. ``armed`` is the time the timer will fire; a thread that pushes a timer due
/// sooner lowers it and re-arms. The service resets it before it takes the stack, so a timer
/// pushed after that is either taken in this pass or re-arms the timer itself.
///
/// `@unchecked Sendable` is sound: ``heap`` and ``dropped`` are touched only by
/// the service queue's work, which the serial queue runs one at a time; every other field is an
/// atomic, the lock-free stack, or a Dispatch object, which are thread-safe.
@usableFromInline
internal final class DispatchTimers: @unchecked Sendable {
    /// The one instance.
    @usableFromInline
    internal static let shared = DispatchTimers()

    /// Timers scheduled since the service last took them.
    private let pending = ClosableStack<DispatchTimer>()

    /// When the Dispatch timer fires, in uptime nanoseconds; `UInt64.max` while it is not armed.
    private let armed = Atomic<UInt64>(.max)

    /// Where the heap is served: at the highest quality of service, so that a wake-up, which only
    /// hands bodies over to their own queues, is not left waiting behind other work (with both
    /// cores busy, a default one made one limit in ten a few hundred microseconds late).
    private let service = DispatchQueue(label: "Deferred.DispatchTimers", qos: .userInteractive)
    private let wakeUp: any DispatchSourceTimer

    /// Timers scheduled so far, to serve the heap every ``servingInterval`` of them.
    private let scheduled = Atomic<UInt>(0)

    /// Timers withdrawn so far.
    fileprivate let withdrawals = Atomic<Int>(0)

    /// How often scheduling makes the service take the new timers and drop withdrawn ones, even
    /// when no deadline passes: a power of two.
    private static let servingInterval: UInt = 4_096

    // Only the service queue's handler touches these.
    private var heap = TimerHeap<UInt64, DispatchTimer>()
    /// Withdrawn timers the service has dropped so far.
    private var dropped = 0

    private init() {
        wakeUp = DispatchSource.makeTimerSource(queue: service)
        wakeUp.setEventHandler { [unowned self] in
            serve()
        }
        wakeUp.activate()
    }

    /// Schedules `body` to run on `queue` once `nanoseconds` (more than zero) have passed.
    internal func schedule(on queue: DispatchQueue, after nanoseconds: Int, _ body: @escaping @Sendable () -> Void) {
        schedule(DispatchBodyTimer(on: queue, after: nanoseconds, body: body))
    }

    /// Schedules `timer`'s work for its deadline; ``DispatchTimer/withdraw()`` takes it back.
    @usableFromInline
    internal func schedule(_ timer: DispatchTimer) {
        _ = pending.push(timer)  // The stack is never closed.
        // The push and the reading of `armed` in `arm` against the service's reset of `armed`
        // and its taking of the stack: without a full fence on both sides, a processor that may
        // read before its own earlier write is seen (ARM's store buffers) could let each side
        // miss the other, leaving the timer unarmed for it.
        atomicMemoryFence(ordering: .sequentiallyConsistent)
        arm(at: timer.deadline)
        if scheduled.wrappingAdd(1, ordering: .relaxed).newValue & (Self.servingInterval - 1) == 0 {
            // Withdrawn timers would otherwise wait for their deadlines: with long limits that
            // all finish early, memory would grow with the rate of requests.
            service.async { [self] in
                serve()
            }
        }
    }

    /// Makes sure the timer fires by `time`.
    ///
    /// Whoever lowers ``armed`` sets the Dispatch timer, then checks that nobody lowered it further
    /// meanwhile; if somebody did, it sets the timer again. So the last setting is the lowest.
    private func arm(at time: UInt64) {
        var seen = armed.load(ordering: .acquiring)
        while time < seen {
            let (exchanged, original) = armed.compareExchange(
                expected: seen, desired: time, ordering: .acquiringAndReleasing)
            guard exchanged else {
                seen = original
                continue
            }
            var target = time
            while true {
                wakeUp.schedule(deadline: Self.dispatchTime(target), repeating: .never, leeway: .never)
                let now = armed.load(ordering: .acquiring)
                guard now < target else {
                    return
                }
                target = now
            }
        }
    }

    /// `time` as a Dispatch time; past a century of uptime, the distant future, so that no
    /// platform's conversion of uptime nanoseconds to its own ticks can overflow.
    private static func dispatchTime(_ time: UInt64) -> DispatchTime {
        time >= 1 << 62 ? .distantFuture : DispatchTime(uptimeNanoseconds: time)
    }

    /// The service queue's work: takes the new timers, hands every due body to its queue, drops
    /// withdrawn timers once they are half the heap, and arms the timer for the next deadline.
    private func serve() {
        repeat {
            // Reset first: a timer pushed after the stack is taken below lowers `armed` itself.
            _ = armed.exchange(.max, ordering: .acquiringAndReleasing)
            atomicMemoryFence(ordering: .sequentiallyConsistent)  // See `schedule(_:)`.
            // The clock is read before the stack is taken: a timer not taken was scheduled after
            // `now`, so no body handed over below is due later than one still on the stack.
            let now = DispatchTime.now().uptimeNanoseconds
            var arrived = pending.takeAll().reversed()
            while let timer = arrived.popFirst() {
                guard !timer.isWithdrawn else {
                    dropped += 1
                    continue
                }
                heap.insert(timer, at: timer.deadline)
            }
            while let (deadline, timer) = heap.first, deadline <= now || timer.isWithdrawn {
                _ = heap.removeFirst()
                if timer.claim() {
                    // Only a timer with a queue comes here (see `DispatchTimer.queue`).
                    timer.queue?.async(execute: timer.work())
                } else {
                    dropped += 1
                }
            }
            // Handing bodies over takes time: bodies that came due meanwhile are served by another
            // round, which first takes the timers scheduled meanwhile, so that they keep their order.
        } while heap.first.map({ $0.deadline <= DispatchTime.now().uptimeNanoseconds }) == true
        if heap.count >= 1_024, (withdrawals.load(ordering: .relaxed) - dropped) * 2 > heap.count {
            dropped += heap.removeAll { $0.isWithdrawn }
        }
        if let (deadline, _) = heap.first {
            arm(at: deadline)
        }
    }
}

/// Work waiting in ``DispatchTimers``, or in the timer heap of an executor that keeps its own
/// (``TimerScheduling``, a loop of `DeferredExecutors`): it either runs once, on its queue or on
/// that executor, or is withdrawn; one that its executor will never run is abandoned.
///
/// A subclass says what the work is: ``DispatchBodyTimer`` runs a closure, and a time limit's
/// timer decides its attempt, so that a limit costs no closure of its own.
///
/// `@unchecked Sendable` is sound: a subclass's work is written at `init` (published to the
/// service by the stack's push) and afterwards touched only by whoever wins ``claimed``, once;
/// `next` belongs to whoever owns the timer on the stack (see ``ClosableStack``); the rest never
/// changes.
@usableFromInline
package class DispatchTimer: StackNode, @unchecked Sendable {
    /// When the work is due, in uptime nanoseconds (zero for a timer without a queue, whose
    /// executor keeps the deadline).
    @usableFromInline
    internal let deadline: UInt64
    /// Where the work runs: a queue, for a timer of ``DispatchTimers``; `nil` for a timer that an
    /// executor of its own keeps (see ``TimerScheduling``), which runs the work itself.
    @usableFromInline
    internal let queue: DispatchQueue?
    /// Set by whichever of running and withdrawing comes first.
    @usableFromInline
    internal let claimed: Atomic<Bool>
    @exclusivity(unchecked) @usableFromInline package var next: UInt = 0

    /// A timer for work due `nanoseconds` (more than zero) from now, on `queue`; or, without a
    /// queue, for an executor that keeps the deadline itself.
    @usableFromInline
    internal init(on queue: DispatchQueue?, after nanoseconds: Int) {
        if queue != nil {
            let now = DispatchTime.now().uptimeNanoseconds
            let (deadline, overflow) = now.addingReportingOverflow(UInt64(nanoseconds))
            self.deadline = overflow ? .max - 1 : deadline
        } else {
            deadline = 0
        }
        self.queue = queue
        claimed = Atomic(false)
    }

    /// Whether the work was withdrawn (or has been handed to its queue, or run).
    package final var isWithdrawn: Bool {
        claimed.load(ordering: .relaxed)
    }

    /// Claims the work, to run or to withdraw it; `false` if it was claimed already.
    package final func claim() -> Bool {
        !claimed.exchange(true, ordering: .acquiringAndReleasing)
    }

    /// The work to hand to the queue (or for the executor to run), once claimed to run.
    package func work() -> @Sendable () -> Void {
        fatalError("abstract")
    }

    /// Runs the work in place, once claimed to run: what an executor that keeps the timer does.
    package func runWork() {
        work()()
    }

    /// Releases the work, once claimed to withdraw it.
    internal func dropWork() {}

    /// Tells the work that it will never run, once claimed to abandon it; by default, releases it.
    internal func loseWork() {
        dropWork()
    }

    /// Withdraws the work unless it has been handed to its queue, and releases it at once.
    @usableFromInline
    internal final func withdraw() {
        if claim() {
            dropWork()
            if queue != nil {
                DispatchTimers.shared.withdrawals.wrappingAdd(1, ordering: .relaxed)
            }
        }
    }

    /// Abandons the work, which its executor will never run (it shut down), unless it was
    /// withdrawn or run: a time limit's attempt learns that it lost its limit.
    package final func abandon() {
        if claim() {
            loseWork()
        }
    }
}

/// An executor that keeps the timers of time limits set on it in a heap of its own, where a
/// limit whose attempt finishes first is withdrawn: a loop of `DeferredExecutors`.
///
/// A limit on any other executor but a Dispatch queue goes through `submit(after:)`, which cannot
/// be taken back: its body waits, holding a little memory, until its deadline.
@usableFromInline
package protocol TimerScheduling: SchedulingExecutor {
    /// Runs `timer`'s work on this executor once `delay` has passed, once, if it claims the
    /// timer first (see ``DispatchTimer/claim()``); abandons it (``DispatchTimer/abandon()``) if it
    /// will never run it.
    func schedule(_ timer: DispatchTimer, after delay: Duration)
}

/// A closure waiting in ``DispatchTimers``: the body of `submit(after:)`.
internal final class DispatchBodyTimer: DispatchTimer, @unchecked Sendable {
    @exclusivity(unchecked)
    private var body: (@Sendable () -> Void)?

    init(on queue: DispatchQueue, after nanoseconds: Int, body: @escaping @Sendable () -> Void) {
        self.body = body
        super.init(on: queue, after: nanoseconds)
    }

    override package func work() -> @Sendable () -> Void {
        body.take().unsafelyUnwrapped
    }

    override func dropWork() {
        body = nil
    }
}
