public import Deferred

/// A test executor with its own clock: scheduled work runs only when the test advances time.
///
/// Timeouts, delays and retries are tested instantly and deterministically: nothing waits
/// for real time, and work due at the same instant runs in the order it was submitted.
///
/// ```swift
/// let clock = VirtualTimeExecutor()
/// let reply = Deferred<Int>()
/// let limited = reply.timeout(after: .seconds(5), upon: clock, substituting: -1)
/// clock.advance(by: .seconds(4))   // not yet
/// clock.advance(by: .seconds(1))   // limited.peek() == -1
/// ```
///
/// It is also a `Clock`, so code that sleeps runs on the same time: `try await
/// clock.sleep(for: .seconds(1))` and `Task.sleep(for:tolerance:clock:)` suspend until a test
/// advances the clock that far (a cancelled task's sleep ends at once with `CancellationError`).
///
/// `submit(_:)` schedules a body for the current virtual time, so it too runs at the next
/// advance (`advance(by: .zero)` runs just the work that is due). Time has nanosecond
/// resolution. Any thread may submit at any time, even while the clock advances: a body is due
/// at the clock's time when it is scheduled plus its delay, and bodies run in order of due time,
/// then of submission, so the clock never goes back. Advance from one thread at a time,
/// typically the test's; a body that advances the clock it runs on stops the program.
///
/// Scheduling a body and taking the next one due are O(log n) in the number pending; while a
/// test waits for armed work (``waitUntilArmed(_:within:)``), scheduling also counts what is
/// armed, in O(n).
public final class VirtualTimeExecutor: SchedulingExecutor, Clock {
    /// A point on a ``VirtualTimeExecutor``'s clock: how much virtual time had passed since the
    /// executor was created.
    public struct Instant: InstantProtocol, CustomStringConvertible {
        /// How much virtual time had passed since the executor was created.
        public let sinceStart: Duration

        /// The instant `sinceStart` after the executor was created.
        ///
        /// - Parameter sinceStart: How much virtual time had passed by then.
        public init(sinceStart: Duration) {
            self.sinceStart = sinceStart
        }

        /// The instant `duration` later.
        public func advanced(by duration: Duration) -> Instant {
            Instant(sinceStart: sinceStart + duration)
        }

        /// How long from this instant until `other`.
        public func duration(to other: Instant) -> Duration {
            other.sinceStart - sinceStart
        }

        /// The instant `duration` after `instant`: `clock.now + .seconds(5)`.
        public static func + (instant: Instant, duration: Duration) -> Instant {
            instant.advanced(by: duration)
        }

        /// Whether `lhs` comes before `rhs`.
        public static func < (lhs: Instant, rhs: Instant) -> Bool {
            lhs.sinceStart < rhs.sinceStart
        }

        /// The time since the start, as `Duration` prints it.
        public var description: String {
            "start + \(sinceStart)"
        }
    }

    /// The clock, the pending work and the waits for armed work: submitting reads the clock and
    /// schedules in one step, so a body is never due before the time the clock has reached.
    let timeline = Locked(Timeline())

    /// Who runs the clock's work: an advance, the driver of ``run(within:_:)``, or a wait for
    /// armed work running what is due.
    let mover = ClockMover()

    /// Creates an executor whose clock reads zero.
    public init() {}

    /// The current virtual time; while a body runs, its due time.
    public var now: Instant {
        Instant(sinceStart: .nanoseconds(timeline.withLock { $0.now }))
    }

    /// How much virtual time has passed since the executor was created: ``now``'s
    /// ``Instant/sinceStart``.
    public var elapsed: Duration {
        now.sinceStart
    }

    /// The smallest step the clock takes: a nanosecond.
    public var minimumResolution: Duration {
        .nanoseconds(1)
    }

    /// Whether any body, sleep or task job is scheduled and has not run yet.
    public var hasPendingWork: Bool {
        timeline.withLock { !$0.bodies.isEmpty }
    }

    /// Schedules `body` for the current virtual time; it runs at the next advance.
    public func submit(_ body: @escaping @Sendable () -> Void) {
        schedule(after: 0, VirtualWork(kind: .body(task: Task.name), run: body))
    }

    /// Schedules `body` to run once the clock has advanced by `delay`.
    ///
    /// - Parameters:
    ///   - delay: How much virtual time must pass first.
    ///   - body: The work to run.
    public func submit(after delay: Duration, _ body: @escaping @Sendable () -> Void) {
        schedule(after: delay.clampedNanoseconds, VirtualWork(kind: .body(task: Task.name), run: body))
    }

    /// Schedules `work` `delay` nanoseconds from now, and tells whoever waits for it.
    func schedule(after delay: Int, _ work: VirtualWork) {
        timeline.withLock { $0.schedule(after: delay, work) }.1.deliver()
    }

    /// Moves the clock forward by `duration`, running every body that falls due on the way, in
    /// order of due time and then of submission.
    ///
    /// What is runnable runs first: the bodies due now and the jobs of tasks that prefer this
    /// executor (see ``run(within:_:)``), so such a task arms its next sleep before the clock
    /// moves past it. Code on other threads or tasks may not have armed its sleeps yet: wait
    /// for them with ``waitUntilArmed(_:within:)`` first, or advance with
    /// ``advance(by:afterArming:within:)``.
    ///
    /// While a body runs, ``now`` reads its due time; bodies it schedules within the window run
    /// too. Afterwards ``now`` reads the old time plus `duration`.
    ///
    /// - Parameter duration: How far to move the clock; must not be negative.
    public func advance(by duration: Duration) {
        if duration < .zero {
            fatalError("VirtualTimeExecutor cannot move back in time (advance(by: \(duration)))")
        }
        moveClock { now in
            let (target, overflow) = now.addingReportingOverflow(duration.clampedNanoseconds)
            return overflow ? .max : target
        }
    }

    /// Moves the clock forward to `instant`, running every body due by then, in order of due
    /// time and then of submission; does nothing but run the bodies due now if the clock has
    /// passed `instant` already.
    ///
    /// - Parameter instant: Where to move the clock.
    public func advance(to instant: Instant) {
        moveClock { now in max(now, instant.sinceStart.clampedNanoseconds) }
    }

    /// Moves the clock forward through every scheduled body, running each at its due time,
    /// until nothing is scheduled.
    ///
    /// The bodies the running ones schedule run too. The clock stops at the last body's due
    /// time.
    ///
    /// It returns only once nothing is scheduled, so it never returns while bodies keep
    /// scheduling others (a repeating timer, say); use ``advance(by:)`` for those.
    ///
    /// - Returns: How many bodies ran, like ``ManualExecutor/runUntilIdle()``.
    @discardableResult
    public func runUntilIdle() -> Int {
        var count = 0
        while let next = timeline.withLock({ $0.firstDue }) {
            count += moveClock { now in max(now, next) }
        }
        return count
    }

    /// Sleeps until the clock reaches `deadline`: until a test advances it that far; returns at
    /// once if it has.
    ///
    /// - Parameters:
    ///   - deadline: The virtual time to wake at.
    ///   - tolerance: Ignored: the clock is exact.
    /// - Throws: `CancellationError` if the task is cancelled first, at once.
    ///
    /// Keep the clock while tasks sleep on it: only advancing it or cancelling the task ends a
    /// sleep.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let sleeper = VirtualSleeper()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                guard sleeper.wait(continuation) else {
                    return  // Cancelled before it slept.
                }
                let due = deadline.sinceStart.clampedNanoseconds
                let wake = VirtualWork(kind: .sleep(task: Task.name)) { sleeper.wake() }
                let scheduled = timeline.withLock { timeline in
                    due <= timeline.now ? nil : timeline.schedule(at: due, wake)
                }
                scheduled?.1.deliver()
                guard let ticket = scheduled?.0 else {
                    sleeper.wake()  // The clock is there already.
                    return
                }
                // Weak: the wake-up, which the timeline holds, holds the sleeper.
                sleeper.scheduled(ticket) { [weak timeline] ticket in
                    _ = timeline?.withLock { $0.cancel(ticket) }
                }
            }
        } onCancel: {
            sleeper.cancel()
        }
    }

    /// Moves the clock to `target(now)`, running the bodies due by then.
    @discardableResult
    func moveClock(to target: (Int) -> Int) -> Int {
        mover.takeToMove(for: "advanced")
        defer { mover.release() }
        let end = timeline.withLock { target($0.now) }
        var count = 0
        while true {
            // Assigned rather than returned: a closure returned through the lock's generic
            // result would be wrapped in a thunk, one allocation a body.
            var next: (@Sendable () -> Void)?
            timeline.withLock { next = $0.takeFirst(dueBy: end) }
            guard let body = next else {
                return count
            }
            body()
            count += 1
        }
    }
}

/// One task sleeping on a ``VirtualTimeExecutor``: woken by its body, or by its task's
/// cancellation, whichever comes first, exactly once.
private final class VirtualSleeper: Sendable {
    private enum State: Sendable {
        case idle
        case waiting(CheckedContinuation<Void, any Error>)
        case done
    }

    private let state = Locked<State>(.idle)
    private let cancelScheduled = Locked<(@Sendable () -> Void)?>(nil)

    /// Starts waiting; returns `false`, having resumed `continuation` with `CancellationError`,
    /// if the task was cancelled already.
    func wait(_ continuation: CheckedContinuation<Void, any Error>) -> Bool {
        let waits = state.withLock { state in
            guard case .idle = state else {
                return false
            }
            state = .waiting(continuation)
            return true
        }
        if !waits {
            continuation.resume(throwing: CancellationError())
        }
        return waits
    }

    /// Records how to unschedule the wake-up, for a cancellation; runs it now if the task was
    /// cancelled meanwhile.
    func scheduled(_ ticket: VirtualBodies.Ticket, unschedule: @escaping @Sendable (VirtualBodies.Ticket) -> Void) {
        cancelScheduled.withLock { $0 = { unschedule(ticket) } }
        if state.withLock({ if case .done = $0 { true } else { false } }) {
            cancelScheduled.withLock { $0.take() }?()
        }
    }

    /// The clock reached the deadline.
    func wake() {
        cancelScheduled.withLock { $0 = nil }
        finish()?.resume()
    }

    /// The task was cancelled: ends the sleep with `CancellationError` and unschedules it.
    func cancel() {
        finish()?.resume(throwing: CancellationError())
        cancelScheduled.withLock { $0.take() }?()
    }

    /// Moves to done; returns the continuation to resume, if this call ended the wait.
    private func finish() -> CheckedContinuation<Void, any Error>? {
        state.withLock { state in
            defer { state = .done }
            if case .waiting(let continuation) = state {
                return continuation
            }
            return nil
        }
    }
}

extension VirtualTimeExecutor: DeadlineClock {
    /// The instant the executor was created: deadlines on it are measured from there.
    public var deadlineOrigin: Instant {
        Instant(sinceStart: .zero)
    }
}
