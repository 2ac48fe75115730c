import Deferred
import Dispatch

/// One thing armed on a ``VirtualTimeExecutor``'s clock: a task's sleep or a body (a timer, a
/// time limit, a delay, a retry's backoff) due later than the clock's time.
public struct ArmedWork: Sendable, Equatable, CustomStringConvertible {
    /// What waits.
    public enum Kind: Sendable, Equatable {
        /// A task sleeping on the clock (`clock.sleep(for:)`, `Task.sleep(for:clock:)`).
        case sleep
        /// A body submitted with a delay: a timer, a time limit, a delay, a retry's backoff.
        case body
    }

    /// What waits.
    public let kind: Kind

    /// When it is due.
    public let due: VirtualTimeExecutor.Instant

    /// The name of the task that sleeps, or that submitted the body, if it has one.
    public let task: String?

    /// Describes armed work, to compare with ``VirtualTimeExecutor/armed``.
    ///
    /// - Parameters:
    ///   - kind: What waits.
    ///   - due: When it is due.
    ///   - task: The name of its task, if it has one.
    public init(kind: Kind, due: VirtualTimeExecutor.Instant, task: String? = nil) {
        self.kind = kind
        self.due = due
        self.task = task
    }

    /// Describes the armed work: its kind, its task's name and when it is due.
    public var description: String {
        let what = kind == .sleep ? "a sleep" : "a body"
        let from = task.map { kind == .sleep ? " of task \"\($0)\"" : " from task \"\($0)\"" } ?? ""
        return "\(what)\(from) due at \(due)"
    }
}

extension VirtualTimeExecutor {
    /// What is armed on the clock: every sleep and body due later than ``now``, soonest first.
    public var armed: [ArmedWork] {
        timeline.withLock { $0.armed }
    }

    /// Waits until at least `count` sleeps or bodies are armed on the clock (due later than
    /// ``now``), or fails, naming what is armed, once `limit` of real time has passed.
    ///
    /// The code under test runs on other threads or tasks and arms its sleeps and timers when it
    /// gets there; advancing the clock before that would race it. Wait for them first:
    ///
    /// ```swift
    /// let poller = Task { await model.poll(every: .seconds(5), on: clock) }
    /// try await clock.waitUntilArmed()       // the poller sleeps now
    /// clock.advance(by: .seconds(5))        // and wakes
    /// ```
    ///
    /// It returns at once if `count` are armed already. Nothing here yields or sleeps: the
    /// clock ends the wait as the work is scheduled. Meanwhile it runs what is runnable, on the
    /// calling thread, without moving the clock: the bodies due now and the jobs of tasks that
    /// prefer the clock, so such a task gets to its sleep (unless another thread advances the
    /// clock, which then runs them; an advance that comes while the wait runs them waits for it).
    ///
    /// - Parameters:
    ///   - count: How many sleeps or bodies must be armed.
    ///   - limit: How long to wait, in real time, before failing.
    /// - Throws: ``VirtualTimeExecutor/WaitTimedOut`` naming what is armed, or `CancellationError`
    ///   if the task is cancelled first.
    public func waitUntilArmed(_ count: Int = 1, within limit: Duration = .seconds(10)) async throws {
        try await waitUntil(.count(count), within: limit)
    }

    /// Waits until something is armed on the clock due exactly at `instant`, or fails, naming
    /// what is armed, once `limit` of real time has passed.
    ///
    /// - Parameters:
    ///   - instant: The due time to wait for.
    ///   - limit: How long to wait, in real time, before failing.
    /// - Throws: ``VirtualTimeExecutor/WaitTimedOut`` naming what is armed, or `CancellationError`
    ///   if the task is cancelled first.
    public func waitUntilArmed(at instant: Instant, within limit: Duration = .seconds(10)) async throws {
        try await waitUntil(.dueAt(instant.sinceStart.clampedNanoseconds), within: limit)
    }

    /// Blocks the calling thread until at least `count` sleeps or bodies are armed on the clock.
    ///
    /// For a test that is not `async`; like ``waitUntilArmed(_:within:)``, it fails naming what
    /// is armed once `limit` of real time has passed.
    ///
    /// - Parameters:
    ///   - count: How many sleeps or bodies must be armed.
    ///   - limit: How long to wait, in real time, before failing.
    /// - Throws: ``VirtualTimeExecutor/WaitTimedOut`` naming what is armed.
    @available(*, noasync, message: "use waitUntilArmed")
    public func blockUntilArmed(_ count: Int = 1, within limit: Duration = .seconds(10)) throws {
        try blockUntil(.count(count), within: limit)
    }

    /// Blocks the calling thread until something is armed due exactly at `instant`.
    ///
    /// For a test that is not `async`; like ``waitUntilArmed(at:within:)``, it fails naming what
    /// is armed once `limit` of real time has passed.
    ///
    /// - Parameters:
    ///   - instant: The due time to wait for.
    ///   - limit: How long to wait, in real time, before failing.
    /// - Throws: ``VirtualTimeExecutor/WaitTimedOut`` naming what is armed.
    @available(*, noasync, message: "use waitUntilArmed(at:within:)")
    public func blockUntilArmed(at instant: Instant, within limit: Duration = .seconds(10)) throws {
        try blockUntil(.dueAt(instant.sinceStart.clampedNanoseconds), within: limit)
    }

    /// Waits until at least `count` sleeps or bodies are armed, then advances the clock by
    /// `duration`: "advance once the code has armed its sleep", in one line that cannot race.
    ///
    /// ```swift
    /// let reply = Task { try await client.fetchRetrying(on: clock) }
    /// try await clock.advance(by: .seconds(1), afterArming: 1)   // the first backoff ends
    /// ```
    ///
    /// The wait runs what is runnable meanwhile (work due now, and the jobs of tasks that prefer
    /// the clock), and the advance then runs every sleep and body due within `duration`, in
    /// order.
    ///
    /// - Parameters:
    ///   - duration: How far to move the clock.
    ///   - count: How many sleeps or bodies must be armed first.
    ///   - limit: How long to wait for them, in real time, before failing.
    /// - Throws: ``VirtualTimeExecutor/WaitTimedOut`` naming what is armed, or `CancellationError`.
    public func advance(by duration: Duration, afterArming count: Int, within limit: Duration = .seconds(10))
        async throws
    {
        try await waitUntilArmed(count, within: limit)
        advance(by: duration)
    }

    /// A wait on a virtual clock that did not end in time, or a ``run(within:_:)`` that stalled:
    /// what was awaited, and what the clock held then.
    public struct WaitTimedOut: Error, CustomStringConvertible {
        /// What was awaited, in words.
        public let awaited: String

        /// How long it was awaited, in real time.
        public let limit: Duration

        /// The clock's time when the wait gave up.
        public let now: Instant

        /// What was armed then, soonest first.
        public let armed: [ArmedWork]

        /// How many bodies or task jobs were runnable (due, not yet run) then.
        public let runnable: Int

        /// Says what was awaited and what the clock held.
        public var description: String {
            let list = armed.isEmpty ? "nothing" : armed.map(\.description).joined(separator: "; ")
            return "waited \(limit) (real time) for \(awaited) on a VirtualTimeExecutor; at \(now) it had "
                + "armed: \(list); runnable: \(runnable)"
        }
    }

    /// Waits until `condition` holds, running what is runnable meanwhile, or throws once
    /// `limit` has passed.
    private func waitUntil(_ condition: ArmedCondition, within limit: Duration) async throws {
        let deadline = ContinuousClock.now + limit
        while true {
            let watch = ArmedWatch(condition)
            guard let end = await watch.waitAdded(to: self, until: deadline) else {
                try Task.checkCancellation()
                throw timedOut(awaiting: condition.description, within: limit)
            }
            if end == .satisfied {
                return
            }
            _ = runRunnableWork()
        }
    }

    /// Blocks until `condition` holds, running what is runnable meanwhile, or throws once
    /// `limit` has passed.
    private func blockUntil(_ condition: ArmedCondition, within limit: Duration) throws {
        let deadline = ContinuousClock.now + limit
        while true {
            let watch = ArmedWatch(condition)
            guard let end = watch.blockAdded(to: self, until: deadline) else {
                throw timedOut(awaiting: condition.description, within: limit)
            }
            if end == .satisfied {
                return
            }
            _ = runRunnableWork()
        }
    }

    /// Runs the work due now, without moving the clock, unless a thread advances it; returns
    /// whether it could.
    @discardableResult
    func runRunnableWork() -> Bool {
        guard mover.tryTakeToRunDue() else {
            return false
        }
        defer { mover.release() }
        while true {
            var next: (@Sendable () -> Void)?
            timeline.withLock { next = $0.takeFirst(dueBy: $0.now) }
            guard let body = next else {
                return true
            }
            body()
        }
    }

    /// The error of a wait for `awaited` that gave up after `limit`, with what the clock holds.
    func timedOut(awaiting awaited: String, within limit: Duration) -> WaitTimedOut {
        timeline.withLock { timeline in
            WaitTimedOut(
                awaited: awaited, limit: limit, now: Instant(sinceStart: .nanoseconds(timeline.now)),
                armed: timeline.armed, runnable: timeline.runnableCount)
        }
    }
}

/// What a wait for armed work waits for.
enum ArmedCondition: Sendable, CustomStringConvertible {
    /// At least this many sleeps or bodies armed.
    case count(Int)
    /// A sleep or body armed at this time, in nanoseconds since the start (clamped as due
    /// times are).
    case dueAt(Int)

    var description: String {
        switch self {
        case .count(let count): count == 1 ? "a sleep or body to be armed" : "\(count) sleeps or bodies to be armed"
        case .dueAt(let due): "a sleep or body armed at \(VirtualTimeExecutor.Instant(sinceStart: .nanoseconds(due)))"
        }
    }
}

/// One wait for armed work: ended once, by the clock as the work is armed (satisfied) or as work
/// becomes runnable (for its waiter to run), or by its time limit or its task's cancellation; a
/// task or a blocked thread waits on it.
final class ArmedWatch: Sendable {
    /// How a wait ended.
    enum End: Sendable, Equatable {
        /// The condition holds.
        case satisfied
        /// Work became runnable: the waiter runs it and waits again.
        case runnable
        /// The time limit passed or the task was cancelled.
        case gaveUp
    }

    private enum State: Sendable {
        case waiting(CheckedContinuation<End, Never>?)
        case ended(End)
    }

    let condition: ArmedCondition

    private let state = Locked<State>(.waiting(nil))
    private let ended = DispatchSemaphore(value: 0)

    init(_ condition: ArmedCondition) {
        self.condition = condition
    }

    /// Ends the wait with `end`, unless it has ended already.
    func finish(_ end: End) {
        let waiter: CheckedContinuation<End, Never>?? = state.withLock { state in
            guard case .waiting(let continuation) = state else {
                return nil
            }
            state = .ended(end)
            return .some(continuation)
        }
        guard let waiter else {
            return
        }
        ended.signal()
        waiter?.resume(returning: end)
    }

    /// Adds this wait to `clock` and suspends until it ends or `deadline` passes; returns how it
    /// ended (`satisfied` also when the condition turned out to hold as it gave up), or `nil` if
    /// it gave up.
    func waitAdded(to clock: VirtualTimeExecutor, until deadline: ContinuousClock.Instant) async -> End? {
        if let end = clock.timeline.withLock({
            $0.add(self, clockIsFree: clock.mover.isFree)
        }) {
            return end
        }
        let timer = DispatchWorkItem { [self] in finish(.gaveUp) }
        let remaining = ContinuousClock.now.duration(to: deadline).clampedNanoseconds
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(max(remaining, 0)), execute: timer)
        let end = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ended: End? = state.withLock { state in
                    switch state {
                    case .waiting:
                        state = .waiting(continuation)
                        return nil
                    case .ended(let end):
                        return end
                    }
                }
                if let ended {
                    continuation.resume(returning: ended)
                }
            }
        } onCancel: {
            finish(.gaveUp)
        }
        timer.cancel()
        return end == .gaveUp ? givenUp(on: clock) : end
    }

    /// Adds this wait to `clock` and blocks until it ends or `deadline` passes; returns as
    /// ``waitAdded(to:until:)`` does.
    func blockAdded(to clock: VirtualTimeExecutor, until deadline: ContinuousClock.Instant) -> End? {
        if let end = clock.timeline.withLock({
            $0.add(self, clockIsFree: clock.mover.isFree)
        }) {
            return end
        }
        let remaining = ContinuousClock.now.duration(to: deadline).clampedNanoseconds
        if ended.wait(timeout: .now() + .nanoseconds(max(remaining, 0))) == .timedOut {
            finish(.gaveUp)
        }
        let end = state.withLock { state in
            if case .ended(let end) = state { end } else { End.gaveUp }
        }
        return end == .gaveUp ? givenUp(on: clock) : end
    }

    /// Stops watching `clock`; `satisfied` if the condition holds after all, else `nil`.
    private func givenUp(on clock: VirtualTimeExecutor) -> End? {
        clock.timeline.withLock { $0.remove(self) } ? .satisfied : nil
    }
}
