import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

/// Runs `operation` in a task and waits for it at most `seconds` of real time; `nil` if it hung.
private func settle<T: Sendable>(
    within seconds: Double, _ operation: @escaping @Sendable () async throws -> T
) async -> Result<T, any Error>? {
    let box = Locked<Result<T, any Error>?>(nil)
    Task.detached {
        do {
            let value = try await operation()
            box.withLock { $0 = .success(value) }
        } catch {
            box.withLock { $0 = .failure(error) }
        }
    }
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        if let result = box.withLock({ $0 }) {
            return result
        }
        try? await Task.sleep(for: .milliseconds(1))
    }
    return nil
}

private func spin(_ n: Int) {
    let x = Atomic<Int>(0)
    for _ in 0..<n { _ = x.load(ordering: .relaxed) }
}

private final class ZeroLimitRound: Sendable {
    let writer = HeldWriter<Int, TestError>()
    let stops = Counter()
    let atReturn = Locked<Result<Int, TestError>??>(nil)
    let limited = Locked<Attempt<Int, TestError>?>(nil)
    init() { writer.onCancel { [stops] in stops.increment() } }
}

extension StressSuites {
    /// Fresh-eye attacks on the virtual clock's tools (waiting for what is armed, tasks on the
    /// clock, `run`) and on time limits of zero or less, through the public API only.
    @Suite struct VirtualClockAttackTests {
        // MARK: Zero limits racing fills

        /// Races a fill of a round's source (left) against `limit`, a time limit set on it (right),
        /// whose result `read` takes as the right side ends: each round is decided by then, once,
        /// and the work is stopped at most once, never after the fill won.
        static func raceALimitAgainstAFill(
            _ name: String, rounds: Int,
            limit: @escaping @Sendable (Attempt<Int, TestError>) -> Attempt<Int, TestError>,
            read: @escaping @Sendable (Attempt<Int, TestError>) -> Result<Int, TestError>?
        ) {
            RaceHarness.expectInterleavings(
                name, rounds: rounds, expected: ["timed out", "filled"],
                setup: { ZeroLimitRound() },
                left: { round in round.writer.succeed(with: 1) },
                right: { round in
                    let limited = limit(round.writer.attempt)
                    round.atReturn.withLock { $0 = .some(read(limited)) }
                    round.limited.withLock { $0 = limited }
                },
                classify: { round in
                    let seen = round.atReturn.withLock { $0 }!
                    let now = round.limited.withLock { $0 }!.peek()
                    guard let seen else { return "UNDECIDED when read (now \(String(describing: now)))" }
                    if seen != now { return "changed \(seen) -> \(String(describing: now))" }
                    switch seen {
                    case .failure(.timedOut):
                        return round.stops.value <= 1 ? "timed out" : "timed out, stopped \(round.stops.value)"
                    case .success(1):
                        return round.stops.value == 0 ? "filled" : "filled but stopped \(round.stops.value)"
                    default: return "odd \(seen)"
                    }
                })
        }

        /// A zero limit set while another thread fills the source: decided before `timeout`
        /// returns, exactly once, the producer stopped at most once (never after a fill won).
        @Test(arguments: [Duration.zero, .seconds(-1)])
        func aZeroLimitRacingAFillIsDecidedAtReturn(_ limit: Duration) {
            let clock = VirtualTimeExecutor()  // nobody advances it
            Self.raceALimitAgainstAFill(
                "zero limit vs fill", rounds: TestSize.sanitized(2000),
                limit: { $0.timeout(after: limit, upon: clock, failingWith: .timedOut) }, read: { $0.peek() })
        }

        /// A deadline already passed, set while another thread fills the source.
        @Test func aPassedDeadlineRacingAFillIsDecidedAtReturn() {
            Self.raceALimitAgainstAFill(
                "passed deadline vs fill", rounds: TestSize.sanitized(2000),
                limit: { $0.deadline(at: .now - .seconds(1), failingWith: .timedOut) }, read: { $0.peek() })
        }

        /// A deadline already passed, set while another thread fills a source that another
        /// consumer's deadline keeps tracked: decided at return, never stopping the work the
        /// other consumer needs (CI once caught a passed deadline expired as it entered the
        /// ledger racing a fill, the producer's cancel handlers filled twice).
        @Test func aPassedDeadlineOnATrackedSourceRacingAFill() {
            final class Round: Sendable {
                let writer = HeldWriter<Int, TestError>()
                let stops = Counter()
                let other: Attempt<Int, TestError>
                let atReturn = Locked<Result<Int, TestError>??>(nil)

                init() {
                    writer.onCancel { [stops] in stops.increment() }
                    other = writer.attempt.deadline(at: .now + .seconds(3_600), failingWith: .timedOut)
                }
            }
            RaceHarness.expectInterleavings(
                "passed deadline on a tracked source vs fill", rounds: TestSize.sanitized(2000),
                expected: ["timed out", "filled"],
                setup: { Round() },
                left: { round in round.writer.succeed(with: 1) },
                right: { round in
                    let limited = round.writer.attempt.deadline(at: .now - .seconds(1), failingWith: .timedOut)
                    round.atReturn.withLock { $0 = .some(limited.peek()) }
                },
                classify: { round in
                    guard let seen = round.atReturn.withLock({ $0 })! else { return "UNDECIDED at return" }
                    guard round.stops.value == 0 else { return "stopped work another consumer needs" }
                    switch seen {
                    case .failure(.timedOut): return "timed out"
                    case .success(1): return "filled"
                    default: return "odd \(seen)"
                    }
                })
        }

        /// A deadline a microsecond away, set while another thread fills the source.
        ///
        /// The limit fires on the timers' queue as the source settles. Before the fix, a limit made after
        /// its source was decided (holding nothing) was given an empty store of cancel handlers
        /// as it entered the ledger, and its expiry filled that store twice (once as it let go of
        /// its source, once as it published).
        @Test func aShortDeadlineRacingAFill() {
            Self.raceALimitAgainstAFill(
                "short deadline vs fill", rounds: TestSize.sanitized(20_000),
                limit: { $0.deadline(at: .now + .microseconds(1), failingWith: .timedOut) },
                read: { $0.wait(for: .seconds(10)) })
        }

        /// A zero limit set while another consumer of the same source cancels: the producer is
        /// stopped exactly once in the end, and the limit decided at return.
        @Test func aZeroLimitRacingAnotherConsumersCancel() {
            final class Round: Sendable {
                let writer = HeldWriter<Int, TestError>()
                let stops = Counter()
                let other: Attempt<Int, TestError>
                let atReturn = Locked<Result<Int, TestError>??>(nil)
                init() {
                    other = writer.attempt.map(upon: .immediate) { $0 }
                    writer.onCancel { [stops] in stops.increment() }
                }
            }
            let clock = VirtualTimeExecutor()
            RaceHarness.expectInterleavings(
                "zero limit vs other cancel", rounds: TestSize.sanitized(2000), expected: ["ok"],
                setup: { Round() },
                left: { round in round.other.cancel() },
                right: { round in
                    let limited = round.writer.attempt.timeout(after: .zero, upon: clock, failingWith: .timedOut)
                    round.atReturn.withLock { $0 = .some(limited.peek()) }
                },
                classify: { round in
                    guard let seen = round.atReturn.withLock({ $0 })! else { return "UNDECIDED at return" }
                    if round.stops.value != 1 { return "stopped \(round.stops.value) times (\(seen))" }
                    return "ok"
                })
        }

        /// A zero limit racing a cancel of another consumer, with callbacks on the new
        /// attempt and on a stage after it: each callback runs exactly once.
        @Test func aZeroLimitsCallbacksRunOnce() {
            final class Round: Sendable {
                let writer = HeldWriter<Int, TestError>()
                let stops = Counter()
                let calls = Counter()
                let other: Attempt<Int, TestError>
                init() {
                    other = writer.attempt.map(upon: .immediate) { $0 }
                    writer.onCancel { [stops] in stops.increment() }
                }
            }
            let clock = VirtualTimeExecutor()
            RaceHarness.expectInterleavings(
                "zero limit callbacks", rounds: TestSize.sanitized(2000), expected: ["ok"],
                setup: { Round() },
                left: { round in round.other.cancel() },
                right: { round in
                    let limited = round.writer.attempt.timeout(after: .zero, upon: clock, failingWith: .timedOut)
                    limited.upon(.immediate) { _ in round.calls.increment() }
                    limited.map(upon: .immediate) { $0 + 1 }.upon(.immediate) { _ in round.calls.increment() }
                },
                classify: { round in
                    guard round.calls.value == 2 else { return "callbacks ran \(round.calls.value) times" }
                    return round.stops.value == 1 ? "ok" : "stopped \(round.stops.value) times"
                })
        }

        // MARK: waitUntilArmed races

        /// The blocking wait's limit fires as the timer is armed: it returns or throws WaitTimedOut,
        /// never hangs; after a success the work is armed.
        @Test func aBlockingWaitWhoseLimitFiresAsItIsSatisfied() {
            final class Round: Sendable {
                let clock = VirtualTimeExecutor()
                let outcome = Locked<String>("")
            }
            let armedInReport = Counter()
            defer { print("blocking wait: timed out though the report lists the body: \(armedInReport.value)") }
            RaceHarness.expectInterleavings(
                "blocking wait vs arm", rounds: TestSize.sanitized(2000), expected: ["satisfied", "timed out"],
                setup: { Round() },
                left: { round in round.clock.submit(after: .seconds(1)) {} },
                right: { round in
                    do {
                        try round.clock.blockUntilArmed(within: .microseconds(20))
                        round.outcome.withLock {
                            $0 = round.clock.armed.count == 1 ? "satisfied" : "satisfied, not armed"
                        }
                    } catch let error as VirtualTimeExecutor.WaitTimedOut {
                        round.outcome.withLock { $0 = error.armed.isEmpty ? "timed out" : "timed out, armed in report" }
                        spin(0)
                    } catch {
                        round.outcome.withLock { $0 = "odd \(error)" }
                    }
                },
                classify: { round in
                    let o = round.outcome.withLock { $0 }
                    if o == "timed out, armed in report" {
                        armedInReport.increment()
                        return "timed out"
                    }
                    return o
                })
        }

        /// The async wait, raced by an arm from a thread, its time limit and its task's
        /// cancellation, all at once: it ends exactly once, in bounded time, without misusing its
        /// continuation.
        @Test func anAsyncWaitRacingArmLimitAndCancel() async {
            var counts: [String: Int] = [:]
            for round in 0..<TestSize.sanitized(1500) {
                let clock = VirtualTimeExecutor()
                let waiter = Task { try await clock.waitUntilArmed(within: .microseconds(Int64(round % 40))) }
                let stagger = round % 7
                DispatchQueue.global().async {
                    spin(stagger * 50)
                    clock.submit(after: .seconds(1)) {}
                }
                if round % 3 == 0 {
                    spin(stagger * 40)
                    waiter.cancel()
                }
                let result = await settle(within: 5) { try await waiter.value }
                let name: String
                switch result {
                case nil:
                    // Also when the cooperative pool was blocked (tests run in parallel): look again.
                    let late = await settle(within: 20) { try await waiter.value }
                    name = late == nil ? "HUNG (round \(round), armed \(clock.armed.count))" : "slow"
                case .success?: name = "satisfied"
                case .failure(is CancellationError)?: name = "cancelled"
                case .failure(is VirtualTimeExecutor.WaitTimedOut)?: name = "timed out"
                case .failure(let error)?: name = "odd \(error)"
                }
                counts[name, default: 0] += 1
            }
            print("async wait race: \(counts)")
            #expect(!counts.keys.contains { $0.hasPrefix("HUNG") })
            #expect(counts.keys.allSatisfy { ["satisfied", "cancelled", "timed out", "slow"].contains($0) })
        }

        /// Many waiters for different counts, while several threads arm timers and sleeps and
        /// cancel some sleeps: every waiter whose count is reached returns.
        @Test func manyWaitersManyArmers() async throws {
            let clock = VirtualTimeExecutor()
            let sleepers = (0..<20).map { i in
                Task(name: "sleeper \(i)") { try await clock.sleep(for: .seconds(1000 + i)) }
            }
            try await clock.waitUntilArmed(20, within: .seconds(5))
            let waiters = (1...60).map { count in
                Task { try await clock.waitUntilArmed(count, within: count <= 40 ? .seconds(5) : .milliseconds(300)) }
            }
            DispatchQueue.concurrentPerform(iterations: 4) { thread in
                for i in 0..<10 {
                    clock.submit(after: .seconds(thread * 10 + i + 1)) {}
                    if i % 2 == 0 { sleepers[thread * 5 + i / 2].cancel() }
                }
            }
            // 40 timers and 0 sleeps armed: a waiter for up to 40 returns; the rest time out.
            for (index, waiter) in waiters.enumerated() {
                let result = await waiter.result
                if index < 40 {
                    #expect(throws: Never.self) { try result.get() }
                }
            }
            for sleeper in sleepers { _ = await sleeper.result }
            #expect(clock.armed.count == 40 && clock.armed.allSatisfy { $0.kind == .body })
        }

        /// Arming many timers while a wait for all of them is pending: each arm re-lists and sorts
        /// everything armed (O(n log n) per schedule), so this is quadratic.
        @Test func armingManyWhileAWaitIsPending() async throws {
            let clock = VirtualTimeExecutor()
            let n = 4000
            for size in [500, 1000, 2000] {
                let c = VirtualTimeExecutor()
                let w = Task { try await c.waitUntilArmed(size, within: .seconds(60)) }
                try await Task.sleep(for: .milliseconds(10))
                let t0 = ContinuousClock.now
                for i in 0..<size { c.submit(after: .seconds(i + 1)) {} }
                try await w.value
                print("arming \(size) with a pending wait: \(ContinuousClock.now - t0)")
                let d = VirtualTimeExecutor()
                let t1 = ContinuousClock.now
                for i in 0..<size { d.submit(after: .seconds(i + 1)) {} }
                print("arming \(size) without a wait: \(ContinuousClock.now - t1)")
            }
            let started = ContinuousClock.now
            let waiter = Task { try await clock.waitUntilArmed(n, within: .seconds(60)) }
            try await Task.sleep(for: .milliseconds(20))
            for i in 0..<n { clock.submit(after: .seconds(i + 1)) {} }
            try await waiter.value
            let took = ContinuousClock.now - started
            print("arming \(n) with a pending wait took \(took)")
            #expect(took < .seconds(2))
        }

        /// A task that prefers the clock cannot arm its sleep before the clock runs its first job,
        /// so `advance(by:afterArming:)` (wait, then advance) never sees it armed.
        @Test func advanceAfterArmingWithATaskOnTheClock() async throws {
            let clock = VirtualTimeExecutor()
            let sleeper = Task(executorPreference: clock) { try await clock.sleep(for: .seconds(5)) }
            await #expect(throws: Never.self) {
                try await clock.advance(by: .seconds(5), afterArming: 1, within: .milliseconds(300))
            }
            clock.runUntilIdle()
            try await sleeper.value
        }

        /// Extreme limits and counts: a negative limit fails at once, a huge one still ends when
        /// satisfied, a count of zero or less holds at once.
        @Test func extremeLimitsAndCounts() async throws {
            let clock = VirtualTimeExecutor()
            try await clock.waitUntilArmed(0, within: .seconds(-1))
            try await clock.waitUntilArmed(-3, within: .zero)
            await #expect(throws: VirtualTimeExecutor.WaitTimedOut.self) {
                try await clock.waitUntilArmed(within: .seconds(-1))
            }
            #expect(throws: VirtualTimeExecutor.WaitTimedOut.self) { try clock.blockUntilArmedNow(within: .zero) }
            let waiter = Task { try await clock.waitUntilArmed(within: .seconds(Int64.max)) }
            try await Task.sleep(for: .milliseconds(10))
            clock.submit(after: .seconds(Int64.max)) {}
            try await waiter.value
            #expect(clock.armed.count == 1)
            try await clock.waitUntilArmed(at: clock.now + .seconds(Int64.max), within: .seconds(1))
        }

        // MARK: run

        @Test func runThroughTenThousandSleeps() async throws {
            let clock = VirtualTimeExecutor()
            let started = ContinuousClock.now
            let total = try await clock.run {
                var total = 0
                for _ in 0..<10_000 {
                    try await clock.sleep(for: .nanoseconds(1))
                    total += 1
                }
                return total
            }
            #expect(total == 10_000)
            #expect(clock.elapsed == .nanoseconds(10_000))
            // Generous: the measure includes getting back onto a cooperative pool that parallel
            // tests may block.
            #expect(ContinuousClock.now - started < .seconds(10))
        }

        @Test func runThroughTenThousandBridgedFutures() async throws {
            let clock = VirtualTimeExecutor()
            let value = try await clock.run {
                var future = Future<Int>(filledWith: 0)
                for _ in 0..<10_000 {
                    let previous = future
                    future = Future {
                        try? await clock.sleep(for: .nanoseconds(1))
                        return await previous.value + 1
                    }
                }
                return await future.value
            }
            #expect(value == 10_000)
        }

        @Test func runWithATaskGroup() async throws {
            let clock = VirtualTimeExecutor()
            let seen = try await clock.run {
                try await withThrowingTaskGroup(of: Duration.self) { group in
                    for i in (1...200).reversed() {
                        group.addTask {
                            try await clock.sleep(for: .seconds(i))
                            return clock.elapsed
                        }
                    }
                    var seen: [Duration] = []
                    for try await at in group { seen.append(at) }
                    return seen
                }
            }
            #expect(seen == (1...200).map { .seconds($0) }, "children wake in time order, at their time")
            #expect(clock.elapsed == .seconds(200))
        }

        @Test func runThatFinishesWhileTimersRemainArmedDoesNotAdvanceToThem() async throws {
            let clock = VirtualTimeExecutor()
            clock.submit(after: .seconds(100)) {}
            let late = Future { try? await Task.sleep(for: .seconds(50), clock: clock) }
            let value = try await clock.run {
                _ = Future { try? await clock.sleep(for: .seconds(30)) }  // not awaited
                try await clock.sleep(for: .seconds(1))
                return 7
            }
            #expect(value == 7)
            #expect(clock.elapsed == .seconds(1))
            // What the run left armed: the timer, the sleeps and their tasks' last steps.
            clock.runUntilIdle()
            _ = await late.value
        }

        @Test func runInsideRunOnAnotherClockAndTwoRunsAtOnce() async throws {
            let outer = VirtualTimeExecutor()
            let inner = VirtualTimeExecutor()
            let (a, b) = try await outer.run {
                try await outer.sleep(for: .seconds(1))
                let b = try await inner.run {
                    try await inner.sleep(for: .seconds(5))
                    return inner.elapsed
                }
                try await outer.sleep(for: .seconds(1))
                return (outer.elapsed, b)
            }
            #expect(a == .seconds(2) && b == .seconds(5))

            let one = VirtualTimeExecutor()
            let two = VirtualTimeExecutor()
            async let x = one.run {
                for _ in 0..<500 { try await one.sleep(for: .seconds(1)) }
                return one.elapsed
            }
            async let y = two.run {
                for _ in 0..<500 { try await two.sleep(for: .seconds(2)) }
                return two.elapsed
            }
            let (ex, ey) = try await (x, y)
            #expect(ex == .seconds(500) && ey == .seconds(1000))
        }

        /// Waiting for what a child task arms, inside a run: the wait ends before the clock moves.
        @Test func waitingForArmedWorkInsideARun() async throws {
            let clock = VirtualTimeExecutor()
            let (at, woke) = try await clock.run {
                async let sleeper: Duration = {
                    try? await clock.sleep(for: .seconds(5))
                    return clock.elapsed
                }()
                try await clock.waitUntilArmed(within: .seconds(2))
                let at = clock.elapsed
                return (at, await sleeper)
            }
            #expect(at == .zero)
            #expect(woke == .seconds(5))
        }

        /// A stalled run whose operation ignores cancellation fails within about limit + 1 s.
        @Test func aStalledRunIgnoringCancellationFailsInBoundedTime() async {
            let clock = VirtualTimeExecutor()
            let started = ContinuousClock.now
            await #expect(throws: VirtualTimeExecutor.WaitTimedOut.self) {
                try await clock.run(within: .milliseconds(200)) {
                    await Deferred<Int>().value  // never filled, cannot be cancelled
                }
            }
            let took = ContinuousClock.now - started
            // limit + 1 s of grace, plus slack for a cooperative pool that parallel tests block.
            #expect(took < .seconds(6), "took \(took)")
        }

        /// Cancelling the task that awaits a run cancels the operation, promptly.
        @Test func cancellingTheCallerOfARun() async {
            let clock = VirtualTimeExecutor()
            let never = HeldWriter<Int, any Error>()
            let stopped = Counter()
            never.onCancel { stopped.increment() }
            let caller = Task {
                try await clock.run(within: .seconds(20)) {
                    try await never.attempt.get()
                }
            }
            try? await Task.sleep(for: .milliseconds(20))
            let started = ContinuousClock.now
            caller.cancel()
            let result = await settle(within: 3) { try await caller.value }
            #expect(ContinuousClock.now - started < .seconds(1))
            guard case .failure(let error)? = result else {
                Issue.record("no failure: \(String(describing: result))")
                return
            }
            #expect(error is CancellationError, "\(error)")
            #expect(stopped.value == 1)
        }

        /// An unstructured task that the code under test starts during a run inherits the run's
        /// task-local, so a `Future { await … }` it makes later prefers the clock, which nobody runs
        /// once the run returned: the future never finishes.
        @Test func aFutureMadeAfterTheRunByATaskStartedInItFinishes() async throws {
            let clock = VirtualTimeExecutor()
            let background = try await clock.run {
                Task {
                    try? await Task.sleep(for: .milliseconds(50))  // real time: after the run
                    return await Future { () async -> Int in
                        await Task.yield()
                        return 5
                    }.value
                }
            }
            let result = await settle(within: 2) { await background.value }
            #expect(result != nil, "the future made after the run never ran")
        }

        /// An operation that returns a `Future { await … }` still waiting for another thread: after
        /// the run returned, the future's task resumes onto the clock, and finishes as the test
        /// runs the clock (as `run` documents), not before.
        @Test func aBridgedFutureReturnedFromARunFinishesAsTheClockRuns() async throws {
            let clock = VirtualTimeExecutor()
            let future = try await clock.run {
                Future { () async -> Int in
                    await withCheckedContinuation { continuation in
                        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(30)) {
                            continuation.resume(returning: 9)
                        }
                    }
                }
            }
            let deadline = ContinuousClock.now + .seconds(10)
            while !clock.hasPendingWork && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(1))
            }
            #expect(future.peek() == nil, "its task waits for the clock")
            clock.advance(by: .zero)
            #expect(future.peek() == 9)
        }

        // MARK: Task jobs on the clock without run

        @Test func runUntilIdleRunsTaskJobsThroughTheirSleeps() async throws {
            let clock = VirtualTimeExecutor()
            let task = Task(executorPreference: clock) {
                try await clock.sleep(for: .seconds(1))
                async let child: Void = clock.sleep(for: .seconds(2))
                try await child
                return clock.elapsed
            }
            #expect(clock.hasPendingWork)
            let ran = clock.runUntilIdle()
            #expect(ran >= 3)
            #expect(!clock.hasPendingWork)
            #expect(try await task.value == .seconds(3))
        }

        /// Tasks preferring the clock are created on many threads while the test advances it: each
        /// runs at some advance, exactly once.
        @Test func jobsEnqueuedWhileAdvancing() async {
            let clock = VirtualTimeExecutor()
            let ran = Counter()
            let made = Locked<[Task<Void, Never>]>([])
            let group = DispatchGroup()
            for _ in 0..<4 {
                DispatchQueue.global().async(group: group) {
                    for _ in 0..<250 {
                        let task = Task(executorPreference: clock) {
                            ran.increment()
                            try? await clock.sleep(for: .nanoseconds(3))
                            ran.increment()
                        }
                        made.withLock { $0.append(task) }
                    }
                }
            }
            while group.wait(timeout: .now()) == .timedOut {
                clock.advance(by: .nanoseconds(1))
            }
            clock.runUntilIdle()
            for task in made.withLock({ $0 }) { await task.value }
            #expect(ran.value == 2000)
        }

        /// A task on a `ManualExecutor` that drains the executor from inside its own step: the
        /// other task's job runs nested on the same thread.
        @Test func aTaskDrainingItsOwnManualExecutor() async {
            let steps = ManualExecutor()
            let log = Locked<[String]>([])
            let drainer = Task(executorPreference: steps) {
                log.withLock { $0.append("drainer before") }
                steps.runUntilIdle()
                log.withLock { $0.append("drainer after") }
            }
            let other = Task(executorPreference: steps) { log.withLock { $0.append("other") } }
            steps.runUntilIdle()
            await other.value
            await drainer.value
            #expect(log.withLock { $0 } == ["drainer before", "other", "drainer after"])
            let third = Task(executorPreference: steps) { log.withLock { $0.append("third") } }
            let drainer2 = Task(executorPreference: steps) {
                await Task.yield()
                steps.runUntilIdle()
            }
            steps.runOne()  // third
            steps.runOne()  // drainer2 to its yield
            steps.runUntilIdle()
            await third.value
            await drainer2.value
        }

        /// A task that prefers a clock that is dropped while the task waits: leaks, no crash.
        @Test func aTaskOnAClockNobodyKeeps() async {
            let reply = Deferred<Int>()
            let started = Counter()
            do {
                let clock = VirtualTimeExecutor()
                _ = Task(executorPreference: clock) {
                    started.increment()
                    _ = await reply.value
                    started.increment()
                }
                clock.advance(by: .zero)
            }
            reply.fill(with: 1)
            try? await Task.sleep(for: .milliseconds(20))
            #expect(started.value == 1)
        }

        /// The same for a `ManualExecutor`.
        @Test func aTaskOnAManualExecutorNobodyKeeps() async {
            let reply = Deferred<Int>()
            let started = Counter()
            do {
                let steps = ManualExecutor()
                _ = Task(executorPreference: steps) {
                    started.increment()
                    _ = await reply.value
                    started.increment()
                }
                steps.runUntilIdle()
            }
            reply.fill(with: 1)
            try? await Task.sleep(for: .milliseconds(20))
            #expect(started.value == 1)
        }
    }
}

extension VirtualTimeExecutor {
    /// The blocking variant, reached from a synchronous function.
    fileprivate func blockUntilArmedNow(within limit: Duration) throws {
        try blockUntilArmed(1, within: limit)
    }
}
