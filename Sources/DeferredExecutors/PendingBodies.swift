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

/// The delayed bodies of a ``ThreadExecutor`` or a ``LoopExecutor``, by deadline, then submission.
///
/// The heap keeps each instant (a deadline, or the end a pass runs bodies up to) as whole
/// nanoseconds from one instant of the continuous clock, rounded up, the clock's own resolution:
/// it then compares and moves plain integers, where an instant, a type of the standard library's
/// own layout, is copied and compared through its witnesses (a tenth of a loop's processor time
/// with many limits waiting).
struct DelayedBodies: Sendable {
    private var queue = TimerHeap<Int64, TimedBody>()
    private var isClosed = false

    /// The instant the keys count from.
    private static let origin = ContinuousClock.now

    /// `instant` as a key: nanoseconds from ``origin``, rounded up; clamped to what 64 bits hold
    /// (about 292 years either way).
    private static func key(_ instant: ContinuousClock.Instant) -> Int64 {
        let (seconds, attoseconds) = origin.duration(to: instant).components
        guard abs(seconds) < 9_000_000_000 else {
            return seconds < 0 ? .min : .max
        }
        let (nanoseconds, remainder) = attoseconds.quotientAndRemainder(dividingBy: 1_000_000_000)
        return seconds * 1_000_000_000 + nanoseconds + (remainder > 0 ? 1 : 0)
    }

    /// The instant of `key`.
    private static func instant(_ key: Int64) -> ContinuousClock.Instant {
        origin.advanced(by: .nanoseconds(key))
    }

    /// Adds `body` unless the executor shut down; returns whether it did, and whether `body` is
    /// now the first due (the thread may be waiting for a later deadline).
    @discardableResult
    mutating func insert(
        deadline: ContinuousClock.Instant, _ body: @escaping @Sendable () -> Void
    ) -> (accepted: Bool, isFirst: Bool) {
        guard !isClosed else {
            return (false, false)
        }
        let key = Self.key(deadline)
        queue.insert(TimedBody(body), at: key)
        return (true, queue.firstDeadline == key)
    }

    /// When the first body is due, if any waits.
    var firstDeadline: ContinuousClock.Instant? {
        mutating get { queue.firstDeadline.map(Self.instant) }
    }

    /// Takes the first body if it is due by `end`.
    mutating func popFirst(dueBy end: ContinuousClock.Instant) -> (@Sendable () -> Void)? {
        queue.popFirst(dueBy: Self.key(end))?.element.run
    }

    /// Refuses new bodies and hands back the waiting ones not due by `now`, for the caller to
    /// release outside the lock (their captures' deinitializers may submit again); the bodies
    /// already due stay, to run before the thread ends.
    mutating func close(keepingDueBy now: ContinuousClock.Instant) -> [@Sendable () -> Void] {
        isClosed = true
        var due: [(deadline: Int64, element: TimedBody)] = []
        while let first = queue.popFirst(dueBy: Self.key(now)) {
            due.append(first)
        }
        let notDue = queue.removeAll()
        for (deadline, body) in due {
            queue.insert(body, at: deadline)
        }
        return notDue.map(\.run)
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
    let closed: (now: ContinuousClock.Instant, notDue: [@Sendable () -> Void])? = delayed.withLock { bodies in
        let now = ContinuousClock.now
        guard pending.close() else {
            return nil
        }
        return (now, bodies.close(keepingDueBy: now))
    }
    return closed?.now
}
