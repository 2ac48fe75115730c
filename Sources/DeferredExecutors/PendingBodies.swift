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
struct DelayedBodies: Sendable {
    private var queue = TimerHeap<ContinuousClock.Instant, TimedBody>()
    private var isClosed = false

    /// Adds `body` unless the executor shut down.
    mutating func insert(deadline: ContinuousClock.Instant, _ body: @escaping @Sendable () -> Void) -> Bool {
        guard !isClosed else {
            return false
        }
        queue.insert(TimedBody(body), at: deadline)
        return true
    }

    /// When the first body is due, if any waits.
    var firstDeadline: ContinuousClock.Instant? {
        mutating get { queue.firstDeadline }
    }

    /// Takes the first body if it is due by `end`.
    mutating func popFirst(dueBy end: ContinuousClock.Instant) -> (@Sendable () -> Void)? {
        queue.popFirst(dueBy: end)?.element.run
    }

    /// Refuses new bodies and hands back the waiting ones not due by `now`, for the caller to
    /// release outside the lock (their captures' deinitializers may submit again); the bodies
    /// already due stay, to run before the thread ends.
    mutating func close(keepingDueBy now: ContinuousClock.Instant) -> [@Sendable () -> Void] {
        isClosed = true
        var due: [(deadline: ContinuousClock.Instant, element: TimedBody)] = []
        while let first = queue.popFirst(dueBy: now) {
            due.append(first)
        }
        let notDue = queue.removeAll()
        for (deadline, body) in due {
            queue.insert(body, at: deadline)
        }
        return notDue.map(\.run)
    }
}
