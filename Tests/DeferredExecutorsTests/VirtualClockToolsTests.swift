import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

/// The virtual clock's tools for code that waits: waiting for what is armed, tasks that run on
/// the clock (or on a `ManualExecutor`), and `run`, which advances the clock by itself.
@Suite struct VirtualClockToolsTests {
    // MARK: Waiting for what is armed

    /// A task on the global pool arms its sleep whenever it gets there: the wait ends as it
    /// does, and the advance after it wakes the task.
    @Test func waitingForASleepThatATaskArmsLater() async throws {
        let clock = VirtualTimeExecutor()
        let sleeper = Task(name: "sleeper") {
            try await clock.sleep(for: .seconds(3))
            return clock.elapsed
        }
        try await clock.waitUntilArmed()
        #expect(clock.armed.map(\.description) == ["a sleep of task \"sleeper\" due at start + 3.0 seconds"])
        clock.advance(by: .seconds(3))
        #expect(try await sleeper.value == .seconds(3))
        #expect(clock.armed.isEmpty)
    }

    /// Waiting for more than is armed fails after its limit, naming what is armed, instead of
    /// hanging; meanwhile it ran what was runnable, without moving the clock.
    @Test func aWaitThatIsNotSatisfiedFailsNamingWhatIsArmed() async {
        let clock = VirtualTimeExecutor()
        let ranNow = Counter()
        // Off any task: the test's own task has a name, which the report would give.
        await Task.detached {
            clock.submit(after: .seconds(5)) {}
            clock.submit { ranNow.increment() }
        }.value
        do {
            try await clock.waitUntilArmed(2, within: .milliseconds(50))
            Issue.record("two were never armed")
        } catch let error as VirtualTimeExecutor.WaitTimedOut {
            #expect(error.armed == [ArmedWork(kind: .body, due: clock.now + .seconds(5), task: nil)])
            #expect(error.runnable == 0)
            #expect(
                error.description
                    == "waited 0.05 seconds (real time) for 2 sleeps or bodies to be armed on a VirtualTimeExecutor; "
                    + "at start + 0.0 seconds it had armed: a body due at start + 5.0 seconds; runnable: 0")
        } catch {
            Issue.record("unexpected \(error)")
        }
        #expect(ranNow.value == 1, "the wait ran the body due now")
        #expect(clock.elapsed == .zero)
    }

    /// A task that prefers the clock gets to its sleep while the test waits for it: the wait
    /// runs the task's jobs, so `advance(by:afterArming:)` is one line for it too.
    @Test func waitingRunsTheJobsOfTasksOnTheClock() async throws {
        let clock = VirtualTimeExecutor()
        let reply = Deferred<Int>()
        let task = Task(executorPreference: clock) {
            let value = await reply.value  // resumed from another thread, onto the clock
            try await clock.sleep(for: .seconds(5))
            return value
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(5)) { reply.fill(with: 8) }
        try await clock.advance(by: .seconds(5), afterArming: 1)
        #expect(try await task.value == 8)
    }

    /// A wait for an exact instant ends when something is armed then, not before.
    @Test func waitingForAnInstant() async throws {
        let clock = VirtualTimeExecutor()
        let armer = Task {
            clock.submit(after: .seconds(1)) {}
            try await clock.sleep(until: clock.now + .seconds(7))
        }
        try await clock.waitUntilArmed(at: clock.now + .seconds(7))
        #expect(clock.armed.map(\.due) == [clock.now + .seconds(1), clock.now + .seconds(7)])
        clock.advance(by: .seconds(7))
        try await armer.value
    }

    /// The blocking variant, for a test that is not `async`: a thread arms a timer later.
    @Test func blockingUntilATimerIsArmed() throws {
        let clock = VirtualTimeExecutor()
        let fired = Counter()
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(5)) {
            clock.submit(after: .seconds(2)) { fired.increment() }
        }
        try clock.blockUntilArmed()
        clock.advance(by: .seconds(2))
        #expect(fired.value == 1)
        #expect(throws: VirtualTimeExecutor.WaitTimedOut.self) {
            try clock.blockUntilArmed(within: .milliseconds(20))
        }
    }

    /// A cancelled wait ends at once with `CancellationError`, and is no longer watched.
    @Test func aCancelledWaitEndsAtOnce() async {
        let clock = VirtualTimeExecutor()
        let waiter = Task { try await clock.waitUntilArmed(within: .seconds(60)) }
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        clock.submit(after: .seconds(1)) {}
        #expect(clock.armed.count == 1)
    }

    /// Work due now is runnable, not armed; a task's job is never armed.
    @Test func onlyWorkDueLaterIsArmed() async throws {
        let clock = VirtualTimeExecutor()
        clock.submit {}
        clock.submit(after: .zero) {}
        #expect(clock.armed.isEmpty)
        let task = Task(executorPreference: clock) { 1 }
        #expect(clock.armed.isEmpty)
        clock.advance(by: .zero)
        #expect(await task.value == 1)
    }

    /// `advance(by:afterArming:)`: wait and advance in one line.
    @Test func advancingOnceArmed() async throws {
        let clock = VirtualTimeExecutor()
        let sleeper = Task { try await clock.sleep(for: .milliseconds(250)) }
        try await clock.advance(by: .milliseconds(250), afterArming: 1)
        try await sleeper.value
        #expect(clock.elapsed == .milliseconds(250))
    }

    /// A wait runs what is due while the test advances the clock from its own thread: whichever
    /// comes second waits for the other, and nothing stops the program or runs twice.
    @Test func advancingWhileAWaitRunsWhatIsDue() async throws {
        for _ in 0..<10 {
            let clock = VirtualTimeExecutor()
            let ran = Counter()
            let fed = Deferred<Void>()
            let waiter = Task.detached { try await clock.waitUntilArmed(within: .seconds(60)) }
            DispatchQueue.global().async {
                for _ in 0..<5_000 {
                    clock.submit {
                        ran.increment()
                        spin(for: .microseconds(2))  // A moment, so that the wait and the advances overlap.
                    }
                    spin(for: .microseconds(5))  // One at a time, each waking the wait.
                }
                fed.fill()
            }
            while !fed.isFilled {
                clock.advance(by: .zero)
                spin(for: .microseconds(20))  // Now and then, landing while the wait runs bodies.
            }
            clock.submit(after: .seconds(1)) {}
            try await waiter.value
            clock.advance(by: .zero)
            #expect(ran.value == 5_000, "each body once, by the wait or by an advance")
            #expect(clock.armed.count == 1)
        }
    }

    // MARK: Tasks on the test's executor

    /// A task that prefers the clock runs only as the clock runs its work, its steps in order
    /// with the clock's timers.
    @Test func aTaskThatPrefersTheClockRunsAsItAdvances() async throws {
        let clock = VirtualTimeExecutor()
        let log = Locked<[String]>([])
        clock.submit(after: .seconds(1)) { log.withLock { $0.append("timer at \(clock.elapsed)") } }
        let task = Task(executorPreference: clock) {
            log.withLock { $0.append("start at \(clock.elapsed)") }
            try await clock.sleep(for: .seconds(2))
            async let child: Duration = clock.elapsed
            let saw = await child
            log.withLock { $0.append("child saw \(saw)") }
        }
        #expect(log.withLock { $0 }.isEmpty, "nothing runs before the clock does")
        clock.advance(by: .zero)
        #expect(log.withLock { $0 } == ["start at 0.0 seconds"])
        clock.advance(by: .seconds(2))
        try await task.value
        #expect(log.withLock { $0 } == ["start at 0.0 seconds", "timer at 1.0 seconds", "child saw 2.0 seconds"])
    }

    /// A task that prefers a `ManualExecutor` runs in `runUntilIdle`, on the draining thread.
    @Test func aTaskThatPrefersAManualExecutorRunsWhenItIsDrained() async {
        let steps = ManualExecutor()
        let reply = Deferred<Int>()
        let seen = Counter()
        let task = Task(executorPreference: steps) {
            seen.increment()
            let value = await reply.value
            seen.increment()
            return value
        }
        #expect(seen.value == 0)
        steps.runUntilIdle()
        #expect(seen.value == 1, "it ran to its wait")
        reply.fill(with: 7)
        #expect(steps.hasPendingWork, "resumed onto the executor")
        steps.runUntilIdle()
        #expect(seen.value == 2)
        #expect(await task.value == 7)
    }

    // MARK: run

    /// `run` advances the clock by itself through every sleep, exactly, and returns the value.
    @Test func runAdvancesThroughSleepsByItself() async throws {
        let clock = VirtualTimeExecutor()
        let value = try await clock.run {
            var total = 0
            for step in 1...5 {
                try await clock.sleep(for: .seconds(step))
                total += step
            }
            return total
        }
        #expect(value == 15)
        #expect(clock.elapsed == .seconds(15))
    }

    /// The library's bridges and child tasks run on the clock under `run`: a retry's backoff, a
    /// `Future { await … }` and an `async let` all advance the clock only when due.
    @Test func theBridgesRunOnTheClockUnderRun() async throws {
        let clock = VirtualTimeExecutor()
        let starts = Counter()
        let (value, future) = try await clock.run {
            let retried = Attempt<Int, any Error>.retry(attempts: 4, delay: .seconds(2), upon: clock) {
                starts.increment()
                return starts.value < 4 ? Attempt(failedWith: TestError.failed(0)) : Attempt(succeededWith: 42)
            }
            let bridged = Future {
                try? await clock.sleep(for: .seconds(1))
                return clock.elapsed
            }
            async let late: Duration = {
                try? await clock.sleep(for: .seconds(10))
                return clock.elapsed
            }()
            return (try await retried.get(), [await bridged.value, await late])
        }
        #expect(value == 42)
        #expect(starts.value == 4)
        #expect(future == [.seconds(1), .seconds(10)])
        #expect(clock.elapsed == .seconds(10))
    }

    /// What `operation` throws, `run` throws.
    @Test func runRethrows() async {
        let clock = VirtualTimeExecutor()
        await #expect(throws: TestError.failed(3)) {
            try await clock.run {
                try await clock.sleep(for: .seconds(1))
                throw TestError.failed(3)
            }
        }
        #expect(clock.elapsed == .seconds(1))
    }

    /// Work from another thread (a reply on a Dispatch queue) is waited for while nothing is
    /// armed or runnable on the clock.
    @Test func runWaitsForWorkFromOtherThreads() async throws {
        let clock = VirtualTimeExecutor()
        let value = try await clock.run {
            let reply = Future(upon: DispatchQueue.global()) {
                Thread.sleep(forTimeInterval: 0.01)
                return 5
            }
            return await reply.value
        }
        #expect(value == 5)
        #expect(clock.elapsed == .zero)
    }

    /// A run that can never finish (it waits for a reply nobody sends) fails after its limit,
    /// naming what the clock holds, and cancels its operation.
    @Test func aStalledRunFailsInsteadOfHanging() async {
        let clock = VirtualTimeExecutor()
        let cancelled = Counter()
        do {
            _ = try await clock.run(within: .milliseconds(100)) {
                let never = DeferredAttempt<Int, any Error>()
                never.onCancel { cancelled.increment() }
                return try await never.attempt.get()
            }
            Issue.record("the run finished")
        } catch let error as VirtualTimeExecutor.WaitTimedOut {
            #expect(error.armed.isEmpty && error.runnable == 0)
            #expect(error.description.contains("for the operation of run(within:) to finish"))
        } catch {
            Issue.record("unexpected \(error)")
        }
        #expect(cancelled.value == 1, "the operation's task was cancelled")
    }

    /// A run that keeps the clock busy without finishing (a timer that reschedules itself
    /// forever) fails after its limit too.
    @Test func aRunBusyForeverFailsAfterItsLimit() async {
        let clock = VirtualTimeExecutor()
        let ticking = Atomic<Bool>(true)
        @Sendable func tick() {
            if ticking.load(ordering: .relaxed) {
                clock.submit(after: .seconds(1), tick)
            }
        }
        tick()
        let never = DeferredAttempt<Int, any Error>()
        let attempt = never.attempt
        await #expect(throws: VirtualTimeExecutor.WaitTimedOut.self) {
            try await clock.run(within: .milliseconds(100)) {
                try await attempt.get()
            }
        }
        #expect(attempt.isCancelled, "the run cancelled its operation, whose get() gave up")
        _ = consume never
        ticking.store(false, ordering: .relaxed)
        clock.runUntilIdle()  // The last tick, which schedules no other.
    }

    // MARK: The guide's examples

    /// The "Testing Code That Waits" guide's retry: backoffs of 1 and 2 seconds, no advance.
    @Test func theGuidesRetryLoadsOnTheThirdTry() async throws {
        let clock = VirtualTimeExecutor()
        let profile = try await clock.run {
            try await Attempt<String, any Error>.retry(
                attempts: 3, delay: .seconds(1), upon: clock, backoff: .exponential()
            ) {
                clock.elapsed < .seconds(3) ? Attempt(failedWith: TestError.failed(0)) : Attempt(succeededWith: "Ada")
            }.get()
        }
        #expect(profile == "Ada")
        #expect(clock.elapsed == .seconds(3))
    }

    /// The guide's debounce: only the last keystroke's search starts, 300 ms after it.
    @Test func theGuidesDebounceSearchesOnceTheTextRests() async throws {
        let clock = VirtualTimeExecutor()
        let searched = Deferred<String>()
        let starts = Counter()
        try await clock.run {
            var pending: Attempt<String, any Error>?
            for text in ["s", "sw", "swift"] {
                pending?.cancel()
                let search = Attempt<String, any Error>(succeededWith: text)
                    .delay(by: .milliseconds(300), upon: clock)
                search.uponSuccess(.immediate) {
                    starts.increment()
                    searched.fill(with: $0)
                }
                pending = search
                try await clock.sleep(for: .milliseconds(100))
            }
            _ = await searched.value
        }
        #expect(searched.peek() == "swift")
        #expect(starts.value == 1)
        #expect(clock.elapsed == .milliseconds(500))
    }

    // MARK: Main-actor code

    /// The guide's recipe for main-actor code: a main-actor test waits for what the code arms
    /// (which lets the main actor run it), advances, and awaits the code's own result.
    @MainActor @Test(arguments: 0..<20) func mainActorCodeWaitsForWhatItArms(_ run: Int) async throws {
        let clock = VirtualTimeExecutor()
        let banner = Banner()
        let showing = Task { await banner.show("Saved \(run)", for: .seconds(3), clock: clock) }
        try await clock.waitUntilArmed()
        #expect(banner.message == "Saved \(run)")
        clock.advance(by: .seconds(3))
        await showing.value
        #expect(banner.message == nil)
    }
}

/// A main-actor model that shows a message for a while.
@MainActor final class Banner {
    var message: String?

    func show(_ text: String, for duration: Duration, clock: some Clock<Duration>) async {
        message = text
        try? await clock.sleep(for: duration)
        message = nil
    }
}

/// Keeps the calling thread busy for `duration`.
private func spin(for duration: Duration) {
    let started = ContinuousClock.now
    while ContinuousClock.now - started < duration {}
}
