import Deferred
import Dispatch

/// One thing that waits on a ``VirtualTimeExecutor``'s clock: a body submitted to it, a job of a
/// task that prefers it, or a task's sleep.
struct VirtualWork: Sendable {
    /// What the work is, for ``ArmedWork``.
    enum Kind: Sendable {
        /// A body given to `submit`: a callback, a timer, a time limit, a delay, a backoff;
        /// `task` names the task that submitted it, if it has a name.
        case body(task: String?)
        /// A job of a task that prefers the executor: always due at once, never armed.
        case job
        /// A task's sleep on the clock, and the task's name, if it has one.
        case sleep(task: String?)
    }

    let kind: Kind
    let run: @Sendable () -> Void

    /// What a waiting ``VirtualWork`` is, as ``ArmedWork`` reports it, due at `due`; `nil` for a
    /// task's job.
    func armed(dueAt due: Int) -> ArmedWork? {
        let instant = VirtualTimeExecutor.Instant(sinceStart: .nanoseconds(due))
        switch kind {
        case .body(let task): return ArmedWork(kind: .body, due: instant, task: task)
        case .sleep(let task): return ArmedWork(kind: .sleep, due: instant, task: task)
        case .job: return nil
        }
    }
}

/// The work waiting on a ``VirtualTimeExecutor``'s clock, by due time, then submission.
typealias VirtualBodies = TimerHeap<Int, VirtualWork>

/// What a change of the ``Timeline`` asks its shell to do once it has let go of the lock: end the
/// waits it satisfied, wake the driver of ``VirtualTimeExecutor/run(within:_:)``.
struct TimelineNotices: Sendable {
    var satisfied: [ArmedWatch] = []
    var driver: DispatchSemaphore?

    /// Ends the satisfied waits and wakes the driver; call without the timeline's lock.
    func deliver() {
        for watch in satisfied {
            watch.finish(satisfied: true)
        }
        driver?.signal()
    }
}

/// A ``VirtualTimeExecutor``'s clock, its pending work, and who waits for work to be armed: the
/// pure state, which the executor keeps behind one lock.
///
/// Work due by ``now`` is *runnable*; work due later is *armed* (a task's job is always due at
/// once). Every change that adds work reports, in ``TimelineNotices``, the waits it satisfied
/// and whether the driver waits for it.
struct Timeline: Sendable {
    /// The clock, in nanoseconds since the executor was created; it only moves forward.
    var now = 0

    var bodies = VirtualBodies()

    /// The waits for armed work that are not satisfied yet.
    var watches: [ArmedWatch] = []

    /// The driver of ``VirtualTimeExecutor/run(within:_:)``, while it waits for work that other
    /// threads may add; the next addition wakes it, once.
    var waitingDriver: DispatchSemaphore?

    /// Schedules `work` `delay` nanoseconds from now.
    mutating func schedule(after delay: Int, _ work: VirtualWork) -> (VirtualBodies.Ticket, TimelineNotices) {
        let (due, overflow) = now.addingReportingOverflow(delay)
        return schedule(at: overflow ? .max : due, work)
    }

    /// Schedules `work` at `due`, or now if that has passed.
    mutating func schedule(at due: Int, _ work: VirtualWork) -> (VirtualBodies.Ticket, TimelineNotices) {
        let ticket = bodies.insert(work, at: max(due, now))
        var notices = TimelineNotices()
        if !watches.isEmpty {
            notices.satisfied = takeSatisfiedWatches()
        }
        notices.driver = waitingDriver.take()
        return (ticket, notices)
    }

    /// Takes the first work due by `end` and moves the clock to its due time; if none is due,
    /// moves the clock to `end` in the same step, so that work scheduled meanwhile is either
    /// due by `end` and taken here, or due after `end`.
    mutating func takeFirst(dueBy end: Int) -> (@Sendable () -> Void)? {
        guard let (due, work) = bodies.popFirst(dueBy: end) else {
            now = max(now, end)
            return nil
        }
        now = max(now, due)
        return work.run
    }

    /// What is armed: the work due after now, soonest first.
    var armed: [ArmedWork] {
        var armed: [ArmedWork] = []
        bodies.forEachWaiting { due, work in
            if due > now, let item = work.armed(dueAt: due) {
                armed.append(item)
            }
        }
        return armed.sorted { $0.due < $1.due }
    }

    /// How much work is runnable: due by now.
    var runnableCount: Int {
        var count = 0
        bodies.forEachWaiting { due, _ in
            if due <= now {
                count += 1
            }
        }
        return count
    }

    /// Adds `watch` unless what it waits for holds already; returns whether it was added.
    mutating func add(_ watch: ArmedWatch) -> Bool {
        guard !watch.condition.holds(for: armed) else {
            return false
        }
        watches.append(watch)
        return true
    }

    /// Removes `watch`, which gave up.
    mutating func remove(_ watch: ArmedWatch) {
        watches.removeAll { $0 === watch }
    }

    /// Removes and returns the watches whose condition holds now.
    private mutating func takeSatisfiedWatches() -> [ArmedWatch] {
        let armed = self.armed
        var satisfied: [ArmedWatch] = []
        watches.removeAll { watch in
            guard watch.condition.holds(for: armed) else {
                return false
            }
            satisfied.append(watch)
            return true
        }
        return satisfied
    }
}
