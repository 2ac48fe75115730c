import Deferred

/// A body waiting on the stack of a ``ThreadExecutor`` or a ``LoopExecutor``; released right after
/// it runs.
final class PendingBody: StackNode {
    let body: @Sendable () -> Void

    /// The address bits of the next older body; only the node's owner of the moment touches it.
    @exclusivity(unchecked)
    var next: UInt = 0

    init(_ body: @escaping @Sendable () -> Void) {
        self.body = body
    }
}

/// What waits in ``DelayedBodies``: a body, or the timer of a time limit set on a loop, which
/// the limit's attempt withdraws if it finishes first.
enum DelayedWork: Sendable {
    case body(@Sendable () -> Void)
    case timer(DispatchTimer)

    /// Runs it, as it comes due: a timer only if it claims it (the attempt did not withdraw it).
    func run() {
        switch self {
        case .body(let body):
            body()
        case .timer(let timer):
            if timer.claim() {
                timer.runWork()
            }
        }
    }

    /// Lets go of it unrun, as its executor will never run it.
    ///
    /// A timer is abandoned: its attempt learns that it lost its limit. Outside any lock, since
    /// that runs the attempt's code.
    func release() {
        if case .timer(let timer) = self {
            timer.abandon()
        }
    }

    /// Whether it is a timer that was withdrawn, which only waits to be dropped.
    var isWithdrawn: Bool {
        if case .timer(let timer) = self { timer.isWithdrawn } else { false }
    }
}

/// The delayed bodies of a ``ThreadExecutor`` or a ``LoopExecutor``, by deadline, then submission.
///
/// The heap keeps each instant (a deadline, or the end a pass runs bodies up to) as whole
/// nanoseconds from one instant of the continuous clock, rounded up, the clock's own resolution:
/// it then compares and moves plain integers, where an instant, a type of the standard library's
/// own layout, is copied and compared through its witnesses (a tenth of a loop's processor time
/// with many limits waiting).
///
/// Withdrawn timers stay in the heap until they come up, or until a pass drops them all: one
/// comes once as many timers were inserted since the last as the heap holds (from 1,024 on), so
/// dropping costs a constant share of each insertion, and the heap holds at most about twice
/// the timers still live, however long the limits.
struct DelayedBodies: Sendable {
    private var queue = TimerHeap<Int64, DelayedWork>()
    private var isClosed = false
    /// Timers inserted since the last pass that dropped the withdrawn ones.
    private var timersSincePass = 0

    /// The instant the keys count from.
    private static let origin = ContinuousClock.now

    /// `instant` as a key: nanoseconds from ``origin``, rounded up; clamped to what 64 bits hold
    /// (about 292 years either way).
    private static func key(_ instant: ContinuousClock.Instant) -> Int64 {
        let offset = origin.duration(to: instant)
        // Compared whole first: `components` traps past what 64 bits of seconds hold.
        guard offset < .seconds(9_000_000_000) else {
            return .max
        }
        guard offset > .seconds(-9_000_000_000) else {
            return .min
        }
        let (seconds, attoseconds) = offset.components
        let (nanoseconds, remainder) = attoseconds.quotientAndRemainder(dividingBy: 1_000_000_000)
        return seconds * 1_000_000_000 + nanoseconds + (remainder > 0 ? 1 : 0)
    }

    /// The instant of `key`.
    private static func instant(_ key: Int64) -> ContinuousClock.Instant {
        origin.advanced(by: .nanoseconds(key))
    }

    /// Adds `work` unless the executor shut down.
    ///
    /// Returns whether it did, and whether `work` is now the first due (the thread may be waiting
    /// for a later deadline). Refused, `work` is the caller's to release (see
    /// ``DelayedWork/release()``).
    @discardableResult
    mutating func insert(deadline: ContinuousClock.Instant, _ work: DelayedWork) -> (accepted: Bool, isFirst: Bool) {
        guard !isClosed else {
            return (false, false)
        }
        if case .timer = work {
            timersSincePass += 1
            if queue.count >= 1_024 && timersSincePass >= queue.count {
                // Withdrawn timers hold nothing of their attempts: dropping them runs no code.
                _ = queue.removeAll { $0.isWithdrawn }
                timersSincePass = 0
            }
        }
        let key = Self.key(deadline)
        queue.insert(work, at: key)
        return (true, queue.firstDeadline == key)
    }

    /// How many bodies and timers wait, withdrawn timers not yet dropped included.
    var count: Int {
        queue.count
    }

    /// When the first body is due, if any waits; withdrawn timers at the front are dropped
    /// first, so that the thread does not wake for them.
    var firstDeadline: ContinuousClock.Instant? {
        mutating get {
            dropWithdrawnFront()
            return queue.firstDeadline.map(Self.instant)
        }
    }

    /// Takes the first body if it is due by `end`.
    mutating func popFirst(dueBy end: ContinuousClock.Instant) -> DelayedWork? {
        dropWithdrawnFront()
        return queue.popFirst(dueBy: Self.key(end))?.element
    }

    /// Drops the withdrawn timers at the front of the heap.
    private mutating func dropWithdrawnFront() {
        while let first = queue.first, first.element.isWithdrawn {
            _ = queue.removeFirst()
        }
    }

    /// Refuses new bodies and hands back the waiting ones not due by `now`, for the caller to
    /// release outside the lock (their captures' deinitializers may submit again, and an
    /// abandoned timer's attempt runs its code); the bodies already due stay, to run before the
    /// thread ends.
    mutating func close(keepingDueBy now: ContinuousClock.Instant) -> [DelayedWork] {
        isClosed = true
        var due: [(deadline: Int64, element: DelayedWork)] = []
        while let first = queue.popFirst(dueBy: Self.key(now)) {
            due.append(first)
        }
        let notDue = queue.removeAll()
        for (deadline, work) in due {
            queue.insert(work, at: deadline)
        }
        return notDue
    }
}

/// Pushes `body` onto `pending`, a thread's stack of bodies to run now, unless it is closed; runs
/// `wake` if the push found the stack empty (the thread takes everything pushed until it looks
/// again, so only that push needs to wake it).
///
/// - Returns: Whether `body` was accepted; if not, it will never run.
func push(
    _ body: @escaping @Sendable () -> Void, onto pending: borrowing ClosableStack<PendingBody>,
    waking wake: () -> Void
) -> Bool {
    switch pending.push(PendingBody(body)) {
    case .accepted(wasEmpty: true):
        wake()
        return true
    case .accepted(wasEmpty: false):
        return true
    case .closed:
        return false
    }
}

/// Closes a thread's stack of bodies and its delayed bodies in one step under the delayed
/// bodies' lock, keeping those due by now; returns that instant, or `nil` if the stack was closed
/// already.
///
/// One step: a delayed body is accepted before both close (and runs, or is released as not due)
/// or refused after both, so one submitted once the stack reads closed is refused; and the
/// thread, which takes this lock after it finds the stack closed, finds the delayed bodies closed
/// too. The instant is read before the stack closes, so the thread, reading the clock after it
/// found the stack closed, finds every body kept here due. The bodies not due are released here,
/// after the lock: their captures' deinitializers may submit again.
func closeTogether(
    _ pending: borrowing ClosableStack<PendingBody>, _ delayed: Locked<DelayedBodies>
) -> ContinuousClock.Instant? {
    let closed: (now: ContinuousClock.Instant, notDue: [DelayedWork])? = delayed.withLock { bodies in
        let now = ContinuousClock.now
        guard pending.close() else {
            return nil
        }
        return (now, bodies.close(keepingDueBy: now))
    }
    for work in closed?.notDue ?? [] {
        work.release()
    }
    return closed?.now
}
