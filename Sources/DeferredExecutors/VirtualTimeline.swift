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

    /// Whether it counts as armed when due later: a body or a sleep, not a task's job.
    var isArmable: Bool {
        if case .job = kind { false } else { true }
    }

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
/// waits it concerns, wake the driver of ``VirtualTimeExecutor/run(within:_:)``.
struct TimelineNotices: Sendable {
    var ended: [(ArmedWatch, ArmedWatch.End)] = []
    var driver: DispatchSemaphore?

    /// Ends the waits and wakes the driver; call without the timeline's lock.
    func deliver() {
        for (watch, end) in ended {
            watch.finish(end)
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

    private(set) var bodies = VirtualBodies()

    /// How many bodies and sleeps wait, due now or later: at least as many as are armed, so
    /// that a wait for a count is checked only once it may hold.
    private var armable = 0

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
        let due = max(due, now)
        let ticket = bodies.insert(work, at: due)
        if work.isArmable {
            armable += 1
        }
        var notices = TimelineNotices()
        if !watches.isEmpty {
            notices.ended = takeWatches(endedBy: due, isArmed: due > now && work.isArmable)
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
        if work.isArmable {
            armable -= 1
        }
        now = max(now, due)
        return work.run
    }

    /// When the first work is due, if any waits.
    var firstDue: Int? {
        mutating get { bodies.firstDeadline }
    }

    /// Unschedules the work of `ticket`, if it still waits, and returns it, to be released
    /// outside the lock.
    mutating func cancel(_ ticket: VirtualBodies.Ticket) -> VirtualWork? {
        let work = bodies.cancel(ticket)
        if work?.isArmable == true {
            armable -= 1
        }
        return work
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

    /// How much is armed: work due after now, other than tasks' jobs.
    var armedCount: Int {
        var count = 0
        bodies.forEachWaiting { due, work in
            if due > now && work.isArmable {
                count += 1
            }
        }
        return count
    }

    /// Whether something is armed due exactly at `due`.
    func isArmed(at due: Int) -> Bool {
        var found = false
        bodies.forEachWaiting { entryDue, work in
            found = found || (entryDue == due && due > now && work.isArmable)
        }
        return found
    }

    /// Whether `condition` holds now.
    func holds(_ condition: ArmedCondition) -> Bool {
        switch condition {
        case .count(let count): count <= 0 || (armable >= count && armedCount >= count)
        case .dueAt(let due): isArmed(at: due)
        }
    }

    /// Adds `watch` unless it ends at once: its condition holds, or work is runnable and its
    /// waiter may run it (no thread advances the clock); returns how it ends, or `nil` once
    /// added.
    mutating func add(_ watch: ArmedWatch, clockIsFree: Bool) -> ArmedWatch.End? {
        if holds(watch.condition) {
            return .satisfied
        }
        if clockIsFree && runnableCount > 0 {
            return .runnable
        }
        watches.append(watch)
        return nil
    }

    /// Removes `watch`, which gave up; returns whether its condition holds after all.
    mutating func remove(_ watch: ArmedWatch) -> Bool {
        watches.removeAll { $0 === watch }
        return holds(watch.condition)
    }

    /// Removes and returns the watches that work scheduled at `due` ends: those whose condition
    /// now holds, if it is armed, and, if it is runnable, all of them: their waiters run it.
    private mutating func takeWatches(endedBy due: Int, isArmed: Bool) -> [(ArmedWatch, ArmedWatch.End)] {
        // `armable` bounds what is armed: count only once some wait's count may be reached.
        let mayHold = watches.contains {
            if case .count(let wanted) = $0.condition { armable >= wanted } else { false }
        }
        let count = isArmed && mayHold ? armedCount : 0
        let isRunnable = due <= now
        var ended: [(ArmedWatch, ArmedWatch.End)] = []
        watches.removeAll { watch in
            if isArmed {
                let holds =
                    switch watch.condition {
                    case .count(let wanted): count >= wanted
                    case .dueAt(let wanted): wanted == due
                    }
                if holds {
                    ended.append((watch, .satisfied))
                    return true
                }
            } else if isRunnable {
                ended.append((watch, .runnable))
                return true
            }
            return false
        }
        return ended
    }
}
