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
    /// clock ends the wait as the work is scheduled.
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
        try await waitUntil(.dueAt(instant), within: limit)
    }

    /// Blocks the calling thread until at least `count` sleeps or bodies are armed on the clock.
    ///
    /// For a test that is not `async`; like the `async` variant, it fails naming what is armed
    /// once `limit` of real time has passed.
    ///
    /// - Parameters:
    ///   - count: How many sleeps or bodies must be armed.
    ///   - limit: How long to wait, in real time, before failing.
    /// - Throws: ``VirtualTimeExecutor/WaitTimedOut`` naming what is armed.
    @available(*, noasync, message: "use the async waitUntilArmed")
    public func waitUntilArmed(_ count: Int = 1, within limit: Duration = .seconds(10)) throws {
        try blockUntil(.count(count), within: limit)
    }

    /// Blocks the calling thread until something is armed due exactly at `instant`.
    ///
    /// For a test that is not `async`; like the `async` variant, it fails naming what is armed
    /// once `limit` of real time has passed.
    ///
    /// - Parameters:
    ///   - instant: The due time to wait for.
    ///   - limit: How long to wait, in real time, before failing.
    /// - Throws: ``VirtualTimeExecutor/WaitTimedOut`` naming what is armed.
    @available(*, noasync, message: "use the async waitUntilArmed")
    public func waitUntilArmed(at instant: Instant, within limit: Duration = .seconds(10)) throws {
        try blockUntil(.dueAt(instant), within: limit)
    }

    /// Waits until at least `count` sleeps or bodies are armed, then advances the clock by
    /// `duration`: "advance once the code has armed its sleep", in one line that cannot race.
    ///
    /// ```swift
    /// let reply = Task { try await client.fetchRetrying(on: clock) }
    /// try await clock.advance(by: .seconds(1), afterArming: 1)   // the first backoff ends
    /// ```
    ///
    /// The advance runs what is runnable first (work due now, and the jobs of tasks that prefer
    /// the clock), then every sleep and body due within `duration`, in order.
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

    /// Waits until `condition` holds, or throws once `limit` has passed.
    private func waitUntil(_ condition: ArmedCondition, within limit: Duration) async throws {
        let watch = ArmedWatch(condition)
        guard timeline.withLock({ $0.add(watch) }) else {
            return
        }
        let timer = DispatchWorkItem { watch.finish(satisfied: false) }
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(limit.clampedNanoseconds), execute: timer)
        let satisfied = await withTaskCancellationHandler {
            await watch.wait()
        } onCancel: {
            watch.finish(satisfied: false)
        }
        timer.cancel()
        guard satisfied else {
            timeline.withLock { $0.remove(watch) }
            try Task.checkCancellation()
            throw timedOut(awaiting: condition.description, within: limit)
        }
    }

    /// Blocks until `condition` holds, or throws once `limit` has passed.
    private func blockUntil(_ condition: ArmedCondition, within limit: Duration) throws {
        let watch = ArmedWatch(condition)
        guard timeline.withLock({ $0.add(watch) }) else {
            return
        }
        guard watch.block(until: .now() + .nanoseconds(limit.clampedNanoseconds)) else {
            timeline.withLock { $0.remove(watch) }
            throw timedOut(awaiting: condition.description, within: limit)
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
    /// A sleep or body armed at this instant.
    case dueAt(VirtualTimeExecutor.Instant)

    /// Whether the condition holds when `armed` is what is armed.
    func holds(for armed: [ArmedWork]) -> Bool {
        switch self {
        case .count(let count): armed.count >= count
        case .dueAt(let instant): armed.contains { $0.due == instant }
        }
    }

    var description: String {
        switch self {
        case .count(let count): count == 1 ? "a sleep or body to be armed" : "\(count) sleeps or bodies to be armed"
        case .dueAt(let instant): "a sleep or body armed at \(instant)"
        }
    }
}

/// One wait for armed work: ended once, by the clock as the work is armed (satisfied), by its time
/// limit or its task's cancellation (not satisfied); a task or a blocked thread waits on it.
final class ArmedWatch: Sendable {
    private enum State: Sendable {
        case waiting(CheckedContinuation<Bool, Never>?)
        case ended(satisfied: Bool)
    }

    let condition: ArmedCondition
    private let state = Locked<State>(.waiting(nil))
    private let ended = DispatchSemaphore(value: 0)

    init(_ condition: ArmedCondition) {
        self.condition = condition
    }

    /// Ends the wait, unless it has ended already.
    func finish(satisfied: Bool) {
        let waiter: CheckedContinuation<Bool, Never>?? = state.withLock { state in
            guard case .waiting(let continuation) = state else {
                return nil
            }
            state = .ended(satisfied: satisfied)
            return .some(continuation)
        }
        guard let waiter else {
            return
        }
        ended.signal()
        waiter?.resume(returning: satisfied)
    }

    /// Suspends until the wait ends; returns whether it was satisfied.
    func wait() async -> Bool {
        await withCheckedContinuation { continuation in
            let outcome: Bool? = state.withLock { state in
                switch state {
                case .waiting:
                    state = .waiting(continuation)
                    return nil
                case .ended(let satisfied):
                    return satisfied
                }
            }
            if let outcome {
                continuation.resume(returning: outcome)
            }
        }
    }

    /// Blocks until the wait ends or `deadline` passes; returns whether it was satisfied.
    func block(until deadline: DispatchTime) -> Bool {
        if ended.wait(timeout: deadline) == .timedOut {
            finish(satisfied: false)
        }
        return state.withLock { state in
            if case .ended(satisfied: true) = state { true } else { false }
        }
    }
}
