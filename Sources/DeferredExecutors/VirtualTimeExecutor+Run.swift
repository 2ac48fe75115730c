import Deferred
import Dispatch
import Foundation

extension VirtualTimeExecutor: TaskExecutor {
    /// Schedules `job`, a step of a task that prefers this executor, for the current virtual
    /// time: it runs at the next advance, in submission order with the bodies due then, or at
    /// once under ``run(within:_:)``.
    ///
    /// A task prefers the executor with `Task(executorPreference: clock) { … }` or
    /// `withTaskExecutorPreference(clock) { … }`, and its child tasks (`async let`, task groups)
    /// inherit that; ``run(within:_:)`` sets it for the code it runs. Such a task runs only when
    /// the clock runs its work, on the thread that advances it, so its steps interleave with the
    /// clock's timers exactly as the test says.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        schedule(after: 0, VirtualWork(kind: .job) { [self] in job.runSynchronously(on: asUnownedTaskExecutor()) })
    }

    /// This executor as the preferred executor of a task.
    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    /// Runs `operation` in a task on this executor and advances the clock by itself: whenever
    /// nothing is runnable, the clock jumps to the next armed sleep or body; returns what
    /// `operation` returns.
    ///
    /// A test of a whole retry policy, a debounce or a polling loop needs no advance of its own:
    ///
    /// ```swift
    /// let clock = VirtualTimeExecutor()
    /// let profile = try await clock.run {
    ///     try await client.fetchProfile(retryingOn: clock)   // three backoffs of 2 s
    /// }
    /// #expect(clock.elapsed == .seconds(6))
    /// ```
    ///
    /// `operation` and the tasks it starts that prefer the clock run on one thread of the run's
    /// own, one step at a time: its child tasks (`async let`, task groups), tasks made with
    /// `Task(executorPreference: clock)`, and the tasks of the library's bridges
    /// (`Future { await … }`, `Attempt { try await … }`). Virtual time passes only when none of
    /// them can run, so no step sees time pass that it did not wait for.
    ///
    /// Work the clock cannot see does not hold the clock back: an unstructured `Task { }` of the
    /// code under test, work on a Dispatch queue or another executor, and code isolated to an
    /// actor (the main actor) run beside the run, and the clock may jump while they are busy.
    /// Give such code the clock as its executor, or wait for what it arms with
    /// ``waitUntilArmed(_:within:)`` and advance by hand instead.
    ///
    /// Await inside `operation` whatever it starts on the clock: once the run returns, the tasks
    /// that prefer the clock run again only when the clock is advanced, and the library's
    /// bridges started later (by an unstructured task that outlived the run) prefer no executor.
    ///
    /// When nothing can run and nothing is armed, the run waits for work from other threads;
    /// once `limit` of real time has passed, it cancels `operation`'s task, gives it up to a
    /// second to end, and fails naming what the clock holds, instead of hanging (even if the
    /// operation ends in that second). Do not advance the clock while it runs, nor run it twice
    /// at once: the clock stops the program.
    ///
    /// - Parameters:
    ///   - limit: How long the whole run may take, in real time.
    ///   - operation: The code under test.
    /// - Returns: What `operation` returned.
    /// - Throws: What `operation` threw, or ``WaitTimedOut`` if it did not finish in time.
    public func run<Success: Sendable>(
        within limit: Duration = .seconds(30),
        _ operation: sending @escaping () async throws -> Success
    ) async throws -> Success {
        let outcome = RunOutcome<Success>()
        let scope = BridgeTasks.Scope(preferring: self)
        defer { scope.close() }
        let task = Task(executorPreference: self) { [self] in
            do {
                let value = try await BridgeTasks.$scope.withValue(scope) { try await operation() }
                outcome.finish(.success(value))
            } catch {
                outcome.finish(.failure(error))
            }
            // The run may wait for other threads' work: this result is such work.
            timeline.withLock { $0.waitingDriver.take() }?.signal()
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Success, any Error>) in
                let driver = Thread { [self] in
                    continuation.resume(with: drive(until: outcome, cancelling: task, within: limit))
                }
                driver.name = "VirtualTimeExecutor.run"
                driver.stackSize = 8 << 20  // The jobs of the code under test run here.
                driver.start()
            }
        } onCancel: {
            task.cancel()
        }
    }

    /// Runs the clock's work, and moves the clock when nothing is runnable, until `outcome` is
    /// known; on the driver's thread.
    ///
    /// Once `limit` has passed, the run has stalled: it cancels `task`, gives it a second of
    /// real time to unwind (its cancelled sleeps and waits end through the clock), and fails.
    private func drive<Success>(
        until outcome: RunOutcome<Success>, cancelling task: Task<Void, Never>, within limit: Duration
    ) -> Result<Success, any Error> {
        mover.takeToMove(for: "run(within:_:) was called")
        defer { mover.release() }
        var deadline = ContinuousClock.now + limit
        var stalled: WaitTimedOut?
        // Signalled by whoever schedules work while the driver waits; a signal left over from a
        // wait that timed out only makes the next wait look again.
        let wake = DispatchSemaphore(value: 0)
        while true {
            var step = RunStep.wait
            timeline.withLock { timeline in
                if let body = timeline.takeFirst(dueBy: timeline.now) {
                    step = .run(body)
                } else if outcome.isKnown {
                    step = .done
                } else if let next = timeline.firstDue {
                    timeline.now = max(timeline.now, next)
                    step = .moved
                } else {
                    timeline.waitingDriver = wake
                }
            }
            switch step {
            case .run(let body):
                body()
            case .moved:
                break
            case .done:
                return stalled.map { .failure($0) } ?? outcome.result.unsafelyUnwrapped
            case .wait:
                let remaining = ContinuousClock.now.duration(to: deadline)
                if wake.wait(timeout: .now() + .nanoseconds(max(remaining.clampedNanoseconds, 0))) == .timedOut {
                    timeline.withLock { $0.waitingDriver = nil }
                }
            }
            guard ContinuousClock.now >= deadline else {
                continue
            }
            if let stalled {
                return .failure(stalled)
            }
            stalled = timedOut(awaiting: "the operation of run(within:) to finish", within: limit)
            task.cancel()
            deadline = ContinuousClock.now + .seconds(1)
        }
    }
}

/// What the driver of ``VirtualTimeExecutor/run(within:_:)`` does next.
private enum RunStep {
    /// Runs a body or a task's job that is due.
    case run(@Sendable () -> Void)
    /// Moved the clock to the next armed work.
    case moved
    /// The operation is done.
    case done
    /// Waits for work from other threads.
    case wait
}

/// The result of the operation of ``VirtualTimeExecutor/run(within:_:)``, once it is known.
private final class RunOutcome<Success: Sendable>: Sendable {
    private let state = Locked<Result<Success, any Error>?>(nil)

    func finish(_ result: Result<Success, any Error>) {
        state.withLock { $0 = result }
    }

    var isKnown: Bool {
        state.withLock { $0 != nil }
    }

    var result: Result<Success, any Error>? {
        state.withLock { $0 }
    }
}
