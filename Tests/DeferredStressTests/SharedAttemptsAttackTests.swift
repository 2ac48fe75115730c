import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

/// A typed failure with no cancellation error: `cancel()` withdraws callbacks but cannot decide.
enum PlainError: Error, Equatable {
    case failed(Int)
}

/// One run of the work, as its producer sees it.
final class AttackRun<Failure: Error>: Sendable {
    let key: Int
    let index: Int
    let writer = HeldWriter<Int, Failure>()
    let stops = Counter()

    init(key: Int, index: Int) {
        self.key = key
        self.index = index
        writer.onCancel { [stops] in stops.increment() }
    }
}

/// Work that records every run it starts.
final class AttackWork<Failure: Error>: Sendable {
    let runs = NSLocked<[AttackRun<Failure>]>([])

    func start(_ key: Int) -> Attempt<Int, Failure> {
        let run = runs.withLock { runs in
            runs.append(AttackRun(key: key, index: runs.count))
            return runs[runs.count - 1]
        }
        return run.writer.attempt
    }

    var starts: Int { runs.withLock { $0.count } }

    func run(_ index: Int) -> AttackRun<Failure> { runs.withLock { $0[index] } }

    /// Succeeds every run with its index.
    func finishAll() {
        for run in runs.withLock({ $0 }) {
            run.writer.succeed(with: run.index)
        }
    }
}

/// A key whose instances are objects, so that a test sees where the table releases them.
final class KeyToken: Sendable {
    let id: Int
    let onDeinit: @Sendable () -> Void

    init(_ id: Int, onDeinit: @escaping @Sendable () -> Void = {}) {
        self.id = id
        self.onDeinit = onDeinit
    }

    deinit { onDeinit() }
}

struct ObjectKey: Hashable, Sendable {
    let token: KeyToken

    static func == (a: ObjectKey, b: ObjectKey) -> Bool { a.token.id == b.token.id }
    func hash(into hasher: inout Hasher) { hasher.combine(token.id) }
}

/// Runs `body` on another thread and returns whether it finished within half a second: `false`
/// means it is blocked, for example on a lock the calling thread holds.
func finishesElsewhere(_ body: @escaping @Sendable () -> Void) -> Bool {
    let done = DispatchSemaphore(value: 0)
    Thread {
        body()
        done.signal()
    }.start()
    return done.wait(timeout: .now() + 0.5) == .success
}

/// A chain of `depth` runs under keys `0..<depth`, and its last caller.
///
/// Key 0 follows `root`, and each later key's start asks for the key before it, which is in
/// flight, so that key's own start (`nested`) never runs. Every caller but the last gives up at
/// once, so the chain alone holds the runs.
func chainOfRuns<Failure: Error>(
    in shared: SharedAttempts<Int, Int, Failure>,
    depth: Int,
    root: Attempt<Int, Failure>,
    nested: () -> Void = {}
) -> Attempt<Int, Failure> {
    var previous = shared.attempt(for: 0) { _ in root }
    for key in 1..<depth {
        let caller = shared.attempt(for: key) { key in
            shared.attempt(for: key - 1) { _ in
                nested()
                return Attempt(succeededWith: -1)
            }
        }
        previous.cancel()
        previous = caller
    }
    return previous
}

/// A shared atomic slot.
final class Stamp: Sendable {
    let value: Atomic<Int>
    init(_ initial: Int) { value = Atomic(initial) }
    func store(_ new: Int) { value.store(new, ordering: .releasing) }
    func load() -> Int { value.load(ordering: .acquiring) }
}

/// An object whose deinit runs a closure.
final class OnDeinit: Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    deinit { body() }
}

extension StressSuites {
    @Suite struct SharedAttemptsAttackTests {
        // MARK: 1. Races

        final class CancelJoinRound: Sendable {
            let shared = SharedAttempts<Int, Int, TestError>()
            let work = AttackWork<TestError>()
            let first: Attempt<Int, TestError>
            let joiner = NSLocked<Attempt<Int, TestError>?>(nil)

            init() {
                first = shared.attempt(for: 0, start: work.start)
            }

            func join() {
                let attempt = shared.attempt(for: 0, start: work.start)
                joiner.withLock { $0 = attempt }
            }
        }

        /// The last caller cancelling against a new caller joining: the joiner either joins the
        /// live run (which then is not stopped) or starts a new one; it never gets a
        /// cancellation.
        @Test(.timeLimit(.minutes(2)))
        func lastCallerCancellingAgainstANewCallerJoining() {
            RaceHarness.expectInterleavings(
                "shared: last cancel vs join",
                rounds: TestSize.attack.raceRounds,
                expected: ["joined the live run", "started a new run"],
                setup: { CancelJoinRound() },
                left: { $0.first.cancel() },
                right: { $0.join() },
                classify: { round in
                    let joiner = round.joiner.withLock { $0 }!
                    let starts = round.work.starts
                    if joiner.isCancelled {
                        Issue.record("the joiner got a cancellation it did not ask for (\(starts) starts)")
                    }
                    let outcome: String
                    switch starts {
                    case 1:
                        outcome = "joined the live run"
                        if round.work.run(0).stops.value != 0 {
                            Issue.record("the run a joiner joined was stopped")
                        }
                    case 2:
                        outcome = "started a new run"
                        if round.work.run(0).stops.value != 1 || round.work.run(1).stops.value != 0 {
                            Issue.record("wrong runs stopped")
                        }
                    default:
                        Issue.record("\(starts) starts")
                        return "bad"
                    }
                    round.work.finishAll()
                    if joiner.peek() != .success(starts - 1) {
                        Issue.record("joiner got \(String(describing: joiner.peek()))")
                    }
                    if round.first.peek() != .failure(.cancelled) {
                        Issue.record("first got \(String(describing: round.first.peek()))")
                    }
                    if round.shared.count != 0 {
                        Issue.record("keys left")
                    }
                    return outcome
                })
        }

        /// The same race with a failure type that has no cancellation error.
        final class PlainCancelJoinRound: Sendable {
            let shared = SharedAttempts<Int, Int, PlainError>()
            let work = AttackWork<PlainError>()
            let first: Attempt<Int, PlainError>
            let joiner = NSLocked<Attempt<Int, PlainError>?>(nil)
            let firstDelivered = Counter()

            init() {
                first = shared.attempt(for: 0, start: work.start)
                first.uponSuccess(.immediate) { [firstDelivered] _ in firstDelivered.increment() }
            }
        }

        @Test(.timeLimit(.minutes(2)))
        func lastCallerCancellingAgainstJoiningWithoutACancellationError() {
            RaceHarness.expectInterleavings(
                "shared plain: last cancel vs join",
                rounds: TestSize.attack.raceRounds,
                expected: ["joined the live run", "started a new run"],
                setup: { PlainCancelJoinRound() },
                left: { $0.first.cancel() },
                right: { round in
                    let attempt = round.shared.attempt(for: 0, start: round.work.start)
                    round.joiner.withLock { $0 = attempt }
                },
                classify: { round in
                    let joiner = round.joiner.withLock { $0 }!
                    let starts = round.work.starts
                    if joiner.isCancelled {
                        Issue.record("the joiner was cancelled")
                    }
                    let outcome = starts == 1 ? "joined the live run" : "started a new run"
                    if starts == 1 && round.work.run(0).stops.value != 0 {
                        Issue.record("the run a joiner joined was stopped")
                    }
                    round.work.finishAll()
                    if joiner.peek() != .success(starts - 1) {
                        Issue.record("joiner got \(String(describing: joiner.peek()))")
                    }
                    if round.firstDelivered.value != 0 {
                        Issue.record("the caller that cancelled got a success")
                    }
                    if round.shared.count != 0 {
                        Issue.record("keys left")
                    }
                    return outcome
                })
        }

        /// The run finishing against a new caller joining: the joiner gets a success, of the old
        /// run or of a new one.
        @Test(.timeLimit(.minutes(2)))
        func finishAgainstJoin() {
            RaceHarness.expectInterleavings(
                "shared: finish vs join",
                rounds: TestSize.attack.raceRounds,
                expected: ["joined the old run", "started a new run"],
                setup: { CancelJoinRound() },
                left: { $0.work.run(0).writer.succeed(with: 0) },
                right: { $0.join() },
                classify: { round in
                    let joiner = round.joiner.withLock { $0 }!
                    let starts = round.work.starts
                    round.work.finishAll()
                    if joiner.peek() != .success(starts - 1) {
                        Issue.record("joiner got \(String(describing: joiner.peek())) after \(starts) starts")
                    }
                    if round.first.peek() != .success(0) {
                        Issue.record("first got \(String(describing: round.first.peek()))")
                    }
                    if round.shared.count != 0 {
                        Issue.record("keys left")
                    }
                    return starts == 1 ? "joined the old run" : "started a new run"
                })
        }

        final class ForgetRound: Sendable {
            let shared = SharedAttempts<Int, Int, TestError>()
            let work = AttackWork<TestError>()
            let first: Attempt<Int, TestError>
            let forgetReturned = Atomic<Int>(0)
            let order = Counter()

            init() {
                first = shared.attempt(for: 0, start: work.start)
            }
        }

        /// `forget` against the run's end: whichever wins, the key is gone afterwards and the next
        /// caller starts a new run.
        @Test(.timeLimit(.minutes(2)))
        func forgetAgainstFinish() {
            RaceHarness.expectInterleavings(
                "shared: forget vs finish",
                rounds: TestSize.attack.raceRounds,
                expected: ["done"],
                setup: { ForgetRound() },
                left: { $0.shared.forget(0) },
                right: { $0.work.run(0).writer.succeed(with: 0) },
                classify: { round in
                    if round.shared.contains(0) || round.shared.count != 0 {
                        Issue.record("the key survived forget and finish")
                    }
                    let next = round.shared.attempt(for: 0, start: round.work.start)
                    if round.work.starts != 2 {
                        Issue.record("the next caller joined a finished or forgotten run")
                    }
                    round.work.finishAll()
                    if next.peek() != .success(1) || round.first.peek() != .success(0) {
                        Issue.record("wrong results")
                    }
                    return "done"
                })
        }

        final class ExpiryRound: Sendable {
            let clock = VirtualTimeExecutor()
            let shared: SharedAttempts<Int, Int, TestError>
            let work = AttackWork<TestError>()
            let joiner = NSLocked<Attempt<Int, TestError>?>(nil)

            init() {
                shared = SharedAttempts(keepingSuccessesFor: .seconds(1), upon: clock)
                _ = shared.attempt(for: 0, start: work.start)
                work.run(0).writer.succeed(with: 0)
            }
        }

        /// A kept result expiring against a caller asking for the key.
        @Test(.timeLimit(.minutes(2)))
        func keptResultExpiringAgainstJoin() {
            RaceHarness.expectInterleavings(
                "shared: expiry vs join",
                rounds: TestSize.attack.raceRounds,
                expected: ["got the kept result", "started a new run"],
                setup: { ExpiryRound() },
                left: { $0.clock.advance(by: .seconds(1)) },
                right: { round in
                    let attempt = round.shared.attempt(for: 0, start: round.work.start)
                    round.joiner.withLock { $0 = attempt }
                },
                classify: { round in
                    let joiner = round.joiner.withLock { $0 }!
                    let starts = round.work.starts
                    if starts == 1 {
                        if joiner.peek() != .success(0) {
                            Issue.record("no kept result: \(String(describing: joiner.peek()))")
                        }
                        if round.shared.count != 0 {
                            Issue.record("kept result not expired")
                        }
                        return "got the kept result"
                    }
                    if joiner.peek() != nil || !round.shared.contains(0) {
                        Issue.record("the new run is not in flight")
                    }
                    round.work.finishAll()
                    if joiner.peek() != .success(1) {
                        Issue.record("joiner got \(String(describing: joiner.peek()))")
                    }
                    round.clock.advance(by: .seconds(1))
                    if round.shared.count != 0 {
                        Issue.record("keys left")
                    }
                    return "started a new run"
                })
        }

        /// Tasks awaiting `get()` whose cancellation races with a new caller joining.
        @Test(.timeLimit(.minutes(2)))
        func awaitingTaskCancelledAgainstJoin() async {
            final class Round: Sendable {
                let shared = SharedAttempts<Int, Int, TestError>()
                let work = AttackWork<TestError>()
                let task: Task<Int, any Error>
                let joiner = NSLocked<Attempt<Int, TestError>?>(nil)
                /// Whether the joiner waits (up to a millisecond) for the cancellation to reach the work:
                /// in half the rounds, because optimized, a join is far quicker than a task's
                /// cancellation (8,000 rounds once saw no new run); the others race freely.
                let joinerWaitsForTheStop: Bool

                init(joinerWaitsForTheStop: Bool) {
                    self.joinerWaitsForTheStop = joinerWaitsForTheStop
                    let attempt = shared.attempt(for: 0, start: work.start)
                    task = Task { try await attempt.get() }
                }
            }
            await RaceHarness.expectInterleavings(
                "shared: task cancel vs join", rounds: 400,
                expected: ["joined the live run", "started a new run"]
            ) { size in
                let rounds = (0..<size).map { Round(joinerWaitsForTheStop: $0 % 2 == 1) }
                try? await Task.sleep(for: .milliseconds(50))  // let the tasks suspend in get()
                RaceHarness.run(
                    rounds,
                    left: { $0.task.cancel() },
                    right: { round in
                        if round.joinerWaitsForTheStop {
                            let deadline = ContinuousClock.now + .milliseconds(1)
                            while round.work.run(0).stops.value == 0 && ContinuousClock.now < deadline {}
                        }
                        let attempt = round.shared.attempt(for: 0, start: round.work.start)
                        round.joiner.withLock { $0 = attempt }
                    })
                var counts: [String: Int] = [:]
                for round in rounds {
                    let taskResult = await round.task.result
                    let joiner = round.joiner.withLock { $0 }!
                    let starts = round.work.starts
                    if joiner.isCancelled {
                        Issue.record("the joiner was cancelled")
                    }
                    if starts == 1 && round.work.run(0).stops.value != 0 {
                        Issue.record("the joined run was stopped")
                    }
                    if starts == 2 && round.work.run(0).stops.value != 1 {
                        Issue.record("the abandoned run was not stopped")
                    }
                    if case .success = taskResult {
                        Issue.record("the cancelled task got a success")
                    }
                    round.work.finishAll()
                    if joiner.peek() != .success(starts - 1) {
                        Issue.record("joiner got \(String(describing: joiner.peek()))")
                    }
                    counts[starts == 1 ? "joined the live run" : "started a new run", default: 0] += 1
                }
                return counts
            }
        }

        final class StaleRound<Failure: Error>: Sendable {
            let shared = SharedAttempts<Int, Int, Failure>()
            let work = AttackWork<Failure>()
            let leaving: Attempt<Int, Failure>
            let staying: Attempt<Int, Failure>
            let clock = Counter()
            let cancelReturned = Stamp(.max)
            let deliveredAt = Stamp(-1)
            /// Deliveries queued here run only after both sides of the race returned.
            let later = ManualExecutor()
            let lateDeliveries = Counter()

            init() {
                leaving = shared.attempt(for: 0, start: work.start)
                staying = shared.attempt(for: 0, start: work.start)
                leaving.uponSuccess(.immediate) { [clock, deliveredAt] _ in
                    deliveredAt.store(clock.increment())
                }
                leaving.uponFailure(.immediate) { [clock, deliveredAt] _ in
                    deliveredAt.store(clock.increment())
                }
                leaving.uponSuccess(later) { [lateDeliveries] _ in lateDeliveries.increment() }
                leaving.uponFailure(later) { [lateDeliveries] _ in lateDeliveries.increment() }
            }

            func cancel() {
                leaving.cancel()
                cancelReturned.store(clock.increment())
            }

            func classify() -> String {
                let variant = "\(Failure.self)"
                // Deterministic: a delivery queued on an executor that runs after cancel()
                // returned has not started, so it must be withdrawn.
                _ = later.runUntilIdle()
                if lateDeliveries.value != 0 {
                    Issue.record("\(variant): a queued delivery ran after cancel() returned")
                }
                if staying.peek() == nil {
                    Issue.record("the staying caller got nothing")
                }
                if shared.count != 0 {
                    Issue.record("keys left")
                }
                // (An .immediate delivery may begin just before cancel() sets its flag and
                // stamp after cancel() returns: that one had started; see staleDeliveryHitRates.)
                return deliveredAt.load() >= 0 ? "delivered before cancel" : "withdrawn"
            }
        }

        /// No stale delivery: a caller that cancelled gets no success or failure once `cancel()`
        /// returned, while the run finishes for another caller at the same moment.
        @Test(.timeLimit(.minutes(2)))
        func noDeliveryAfterCancelReturns() {
            RaceHarness.expectInterleavings(
                "shared: cancel vs finish (stale delivery)",
                rounds: TestSize.attack.raceRounds,
                expected: ["delivered before cancel", "withdrawn"],
                setup: { StaleRound<TestError>() },
                left: { $0.cancel() },
                right: { $0.work.run(0).writer.succeed(with: 0) },
                classify: { $0.classify() })
            RaceHarness.expectInterleavings(
                "shared plain: cancel vs finish (stale delivery)",
                rounds: TestSize.attack.raceRounds,
                expected: ["delivered before cancel", "withdrawn"],
                setup: { StaleRound<PlainError>() },
                left: { $0.cancel() },
                right: { $0.work.run(0).writer.fail(with: .failed(1)) },
                classify: { $0.classify() })
        }

        /// Baseline for the stale-delivery race: the same measurement on a plain (non-shared)
        /// attempt derived from a writer, many rounds, to compare hit rates.
        final class PlainStaleRound: Sendable {
            let writer = HeldWriter<Int, TestError>()
            let leaving: Attempt<Int, TestError>
            let clock = Counter()
            let cancelReturned = Stamp(.max)
            let deliveredAt = Stamp(-1)
            init() {
                leaving = writer.attempt.map(upon: .immediate) { $0 }
                _ = writer.attempt.map(upon: .immediate) { $0 }  // another dependent keeps the work
                leaving.uponSuccess(.immediate) { [clock, deliveredAt] _ in deliveredAt.store(clock.increment()) }
            }
        }

        /// 64 threads on a few keys, with a failure type without a cancellation error and with
        /// `any Error`, callers cancelling, tasks awaiting `get()` cancelled, runs finishing.
        @Test(.timeLimit(.minutes(3)), arguments: [true, false])
        func stormWithoutACancellationError(untyped: Bool) async {
            if untyped {
                await storm(AttackWork<any Error>(), SharedAttempts<Int, Int, any Error>())
            } else {
                await storm(AttackWork<PlainError>(), SharedAttempts<Int, Int, PlainError>())
            }
        }

        func storm<Failure: Error>(_ work: AttackWork<Failure>, _ shared: SharedAttempts<Int, Int, Failure>) async {
            let threads = 64
            let keys = 4
            let operations = TestSize.attack.raceRounds / 20
            let kept = NSLocked<[(key: Int, attempt: Attempt<Int, Failure>)]>([])
            let finishedIndex = NSLocked<Int>(0)
            let finishing = NSLocked<[Int: Int]>([:])  // run index -> finishing order stamp
            let stamps = Atomic<Int>(0)
            let startedAt = NSLocked<[Int: Int]>([:])
            let gate = DispatchGroup()
            let done = DispatchGroup()
            let leftTasks = NSLocked<[Task<Int, any Error>]>([])
            gate.enter()
            for thread in 0..<threads {
                done.enter()
                Thread {
                    var random = SplitMix(seed: UInt64(thread + 1) &* 7919)
                    var mine: [(key: Int, attempt: Attempt<Int, Failure>)] = []
                    gate.wait()
                    for _ in 0..<operations {
                        let key = Int.random(in: 0..<keys, using: &random)
                        switch Int.random(in: 0..<8, using: &random) {
                        case 0:
                            // finish the oldest unfinished run
                            let next: AttackRun<Failure>? = finishedIndex.withLock { index in
                                let runs = work.runs.withLock { $0 }
                                guard index < runs.count else { return nil }
                                index += 1
                                return runs[index - 1]
                            }
                            if let next {
                                let stamp = stamps.wrappingAdd(1, ordering: .relaxed).oldValue
                                finishing.withLock { $0[next.index] = stamp }
                                next.writer.succeed(with: next.index)
                            }
                        case 1, 2:
                            let attempt = shared.attempt(for: key) { key in
                                let stamp = stamps.wrappingAdd(1, ordering: .relaxed).oldValue
                                let attempt = work.start(key)
                                let index = work.starts - 1
                                startedAt.withLock { $0[index] = stamp }
                                return attempt
                            }
                            attempt.cancel()
                        case 3:
                            let attempt = shared.attempt(for: key) { work.start($0) }
                            let task = Task { try await attempt.get() }
                            task.cancel()
                            leftTasks.withLock { $0.append(task) }
                        default:
                            mine.append((key, shared.attempt(for: key) { work.start($0) }))
                        }
                    }
                    kept.withLock { $0.append(contentsOf: mine) }
                    done.leave()
                }.start()
            }
            gate.leave()
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    done.wait()
                    continuation.resume()
                }
            }
            // Finish first: with a failure type that has no cancellation error, a cancelled task's
            // get() keeps waiting for the result (as documented).
            work.finishAll()
            for task in leftTasks.withLock({ $0 }) {
                _ = await task.result
            }
            let runs = work.runs.withLock { $0 }
            var wrong = 0
            var delivered = Set<Int>()
            for caller in kept.withLock({ $0 }) {
                guard case .success(let index) = caller.attempt.value(within: 30), runs[index].key == caller.key else {
                    wrong += 1
                    continue
                }
                delivered.insert(index)
            }
            #expect(wrong == 0, "\(wrong) callers that kept their attempt got no success of their key")
            let stoppedAndDelivered = runs.filter { $0.stops.value > 0 && delivered.contains($0.index) }.count
            #expect(stoppedAndDelivered == 0)
            #expect(runs.allSatisfy { $0.stops.value <= 1 })
            #expect(shared.count == 0)
            progress("shared storm (\(Failure.self)): \(runs.count) runs, \(delivered.count) delivered")
        }

        /// 64 threads mixing every operation at once.
        ///
        /// Joins kept and cancelled, runs lost by their producers, `forget`, `count`, `contains`
        /// and finishes: nothing crashes or hangs; every kept caller of a run that finished gets a
        /// success of its key; and once everything has finished or been given up, the table is
        /// empty.
        @Test(.timeLimit(.minutes(3)))
        func everyOperationAtOnce() async {
            let shared = SharedAttempts<Int, Int, TestError>()
            let work = AttackWork<TestError>()
            let kept = NSLocked<[(key: Int, attempt: Attempt<Int, TestError>)]>([])
            let finished = NSLocked<Int>(0)
            let operations = TestSize.attack.raceRounds / 20
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    DispatchQueue.concurrentPerform(iterations: 64) { thread in
                        var random = SplitMix(seed: UInt64(thread + 1) &* 104_729)
                        var mine: [(key: Int, attempt: Attempt<Int, TestError>)] = []
                        var lost: [Attempt<Int, TestError>] = []
                        for _ in 0..<operations {
                            let key = Int.random(in: 0..<6, using: &random)
                            switch Int.random(in: 0..<10, using: &random) {
                            case 0:
                                let next: AttackRun<TestError>? = finished.withLock { index in
                                    let runs = work.runs.withLock { $0 }
                                    guard index < runs.count else { return nil }
                                    index += 1
                                    return runs[index - 1]
                                }
                                next?.writer.succeed(with: next!.index)
                            case 1: shared.forget(key)
                            case 2: _ = shared.count
                            case 3: _ = shared.contains(key)
                            case 4:
                                // A run lost by its producer: its callers wait for good.
                                lost.append(shared.attempt(for: key) { _ in Attempt { _ in } })
                                if lost.count > 4 { lost.removeFirst().cancel() }
                            case 5, 6: shared.attempt(for: key, start: work.start).cancel()
                            default: mine.append((key, shared.attempt(for: key, start: work.start)))
                            }
                        }
                        for caller in lost {
                            caller.cancel()
                        }
                        kept.withLock { $0.append(contentsOf: mine) }
                    }
                    continuation.resume()
                }
            }
            work.finishAll()
            let runs = work.runs.withLock { $0 }
            var wrong = 0
            var pending = 0
            for caller in kept.withLock({ $0 }) {
                switch caller.attempt.peek() {
                case .success(let index) where runs[index].key == caller.key: break
                case nil: pending += 1  // joined a run lost by its producer
                default: wrong += 1
                }
            }
            #expect(wrong == 0)
            // The callers of lost runs give up, which ends those runs.
            for caller in kept.withLock({ $0 }) where caller.attempt.peek() == nil {
                caller.attempt.cancel()
            }
            kept.withLock { $0 = [] }
            #expect(shared.count == 0, "keys left once everything finished or was given up")
            progress("shared, every operation at once: \(runs.count) runs, \(pending) callers of lost runs")
        }

        // MARK: 2. One run per key

        /// Many threads asking for one key while a run is in flight never start a second one.
        @Test(.timeLimit(.minutes(1)))
        func oneRunWhileWanted() {
            let shared = SharedAttempts<Int, Int, TestError>()
            let work = AttackWork<TestError>()
            let anchor = shared.attempt(for: 0, start: work.start)
            DispatchQueue.concurrentPerform(iterations: 64) { _ in
                for _ in 0..<200 {
                    shared.attempt(for: 0, start: work.start).cancel()
                    let task = Task { try await shared.attempt(for: 0, start: work.start).get() }
                    task.cancel()
                }
            }
            #expect(work.starts == 1, "a second run started while the first was wanted")
            #expect(work.run(0).stops.value == 0)
            work.finishAll()
            #expect(anchor.peek() == .success(0))
        }

        // MARK: 4. Deep chains, fans, re-entrancy

        /// Key n's start joins key n-1: a chain of runs as deep as the test size, finished from its
        /// root, on the small stack.
        @Test(.timeLimit(.minutes(2)), .skippedUnderThreadSanitizer)
        func deepChainOfRunsFinishes() async {
            let depth = TestSize.attack.depth
            let (result, left, startsRan) = await onDeepStack("shared chain finish", size: .attack) {
                let shared = SharedAttempts<Int, Int, TestError>()
                let root = HeldWriter<Int, TestError>()
                let nestedStarts = Counter()
                let previous = chainOfRuns(in: shared, depth: depth, root: root.attempt) { nestedStarts.increment() }
                root.succeed(with: 7)
                return (previous.peek(), shared.count, nestedStarts.value)
            }
            #expect(result == .success(7))
            #expect(left == 0)
            #expect(startsRan == 0)
        }

        /// The same chain cancelled from its end: the cancellation climbs to the root's producer.
        @Test(.timeLimit(.minutes(2)), .skippedUnderThreadSanitizer)
        func deepChainOfRunsCancelsFromTheEnd() async {
            let depth = TestSize.attack.depth
            let (stops, left, rootResult) = await onDeepStack("shared chain cancel", size: .attack) {
                let shared = SharedAttempts<Int, Int, TestError>()
                let root = HeldWriter<Int, TestError>()
                let stops = Counter()
                root.onCancel { stops.increment() }
                let previous = chainOfRuns(in: shared, depth: depth, root: root.attempt)
                previous.cancel()
                return (stops.value, shared.count, root.peek())
            }
            #expect(stops == 1)
            #expect(left == 0)
            #expect(rootResult == .failure(.cancelled))
        }

        /// The chain cancelled from its end with a failure type without a cancellation error.
        @Test(.timeLimit(.minutes(2)), .skippedUnderThreadSanitizer)
        func deepChainOfPlainRunsCancelsFromTheEnd() async {
            let depth = TestSize.attack.depth
            let (stops, left) = await onDeepStack("shared plain chain cancel", size: .attack) {
                let shared = SharedAttempts<Int, Int, PlainError>()
                let root = HeldWriter<Int, PlainError>()
                let stops = Counter()
                root.onCancel { stops.increment() }
                let previous = chainOfRuns(in: shared, depth: depth, root: root.attempt)
                previous.cancel()
                let left = shared.count
                root.succeed(with: 1)  // a late success of the stopped work reaches no one
                return (stops.value, left)
            }
            #expect(stops == 1)
            #expect(left == 0)
        }

        /// The same chain whose root writer is lost: the loss ends every run of the chain, without
        /// recursion, and every key is forgotten.
        @Test(.timeLimit(.minutes(2)), .skippedUnderThreadSanitizer)
        func deepChainOfRunsWithALostRoot() async {
            let depth = TestSize.attack.depth
            let left = await onDeepStack("shared chain, root lost", size: .attack) {
                let shared = SharedAttempts<Int, Int, LosableError>()
                do {
                    let root = HeldWriter<Int, LosableError>()
                    _ = chainOfRuns(in: shared, depth: depth, root: root.attempt)
                }
                return shared.count
            }
            #expect(left == 0)
        }

        /// A failure type whose lost writers fail as abandoned.
        enum LosableError: CancellableError, AbandonableError {
            case cancelled, abandoned
        }

        /// 100,000 callers on one key: one run, everyone delivered; then 100,000 callers cancelling
        /// one by one, the work stopped by the last.
        @Test(.timeLimit(.minutes(2)), .skippedUnderThreadSanitizer)
        func hundredThousandCallersOnOneKey() async {
            let (delivered, starts, stopsBeforeLast, stopsAfterLast, seconds) = await onDeepStack(
                "shared fan", size: .attack
            ) {
                let shared = SharedAttempts<Int, Int, TestError>()
                let work = AttackWork<TestError>()
                let delivered = Counter()
                for _ in 0..<100_000 {
                    shared.attempt(for: 0, start: work.start).uponSuccess(.immediate) { _ in delivered.increment() }
                }
                work.run(0).writer.succeed(with: 1)
                let began = ContinuousClock.now
                let callers = (0..<100_000).map { _ in shared.attempt(for: 1, start: work.start) }
                for caller in callers.dropLast() {
                    caller.cancel()
                }
                let before = work.run(1).stops.value
                callers.last!.cancel()
                let elapsed = ContinuousClock.now - began
                return (delivered.value, work.starts, before, work.run(1).stops.value, elapsed)
            }
            #expect(delivered == 100_000)
            #expect(starts == 2)
            #expect(stopsBeforeLast == 0 && stopsAfterLast == 1)
            #expect(TestSize.underSanitizer || seconds < .seconds(5), "100,000 joins and cancels took \(seconds)")
        }

        /// A caller's callback asking for the same key while the run delivers: it never gets stuck
        /// or cancelled.
        @Test func callbackAsksForTheSameKeyDuringDelivery() {
            let shared = SharedAttempts<Int, Int, TestError>()
            let work = AttackWork<TestError>()
            let inner = NSLocked<Attempt<Int, TestError>?>(nil)
            let caller = shared.attempt(for: 0, start: work.start)
            caller.uponSuccess(.immediate) { _ in
                let again = shared.attempt(for: 0, start: work.start)
                inner.withLock { $0 = again }
            }
            work.run(0).writer.succeed(with: 0)
            let again = inner.withLock { $0 }!
            // Either joined the finished run (gets 0) or started run 1.
            if work.starts == 2 {
                #expect(again.peek() == nil && shared.contains(0))
                work.run(1).writer.succeed(with: 1)
                #expect(again.peek() == .success(1))
            } else {
                #expect(again.peek() == .success(0))
            }
            #expect(shared.count == 0)
        }

        /// The work's cancel handler (run as the last caller leaves) asks for the same key: it
        /// starts a new run, never joins the cancelled one, and the table's lock is not held.
        @Test func cancelHandlerAsksForTheSameKey() {
            let shared = SharedAttempts<Int, Int, TestError>()
            let work = AttackWork<TestError>()
            let inner = NSLocked<Attempt<Int, TestError>?>(nil)
            let first = shared.attempt(for: 0) { key in
                let attempt = work.start(key)
                work.run(0).writer.onCancel {
                    #expect(shared.count >= 0)
                    let again = shared.attempt(for: 0, start: work.start)
                    inner.withLock { $0 = again }
                }
                return attempt
            }
            first.cancel()
            let again = inner.withLock { $0 }!
            #expect(work.starts == 2, "the cancel handler joined the cancelled run")
            #expect(!again.isCancelled)
            #expect(shared.contains(0))
            work.finishAll()
            #expect(again.peek() == .success(1))
            #expect(shared.count == 0)
        }

        /// `start` reading and forgetting its own key from inside: no deadlock; forgetting leaves
        /// the run to its callers.
        @Test func startTouchingItsOwnKey() {
            let shared = SharedAttempts<Int, Int, TestError>()
            let work = AttackWork<TestError>()
            let sawItself = NSLocked<Bool?>(nil)
            let first = shared.attempt(for: 0) { key in
                sawItself.withLock { $0 = shared.contains(key) }
                shared.forget(key)
                return work.start(key)
            }
            #expect(sawItself.withLock { $0 } == true)
            #expect(!shared.contains(0))
            let second = shared.attempt(for: 0, start: work.start)
            #expect(work.starts == 2)
            work.finishAll()
            #expect(first.peek() == .success(0) && second.peek() == .success(1))
            #expect(shared.count == 0)
        }

        /// A callback cancelling another caller of the same key while the run delivers.
        @Test func callbackCancelsAnotherCallerDuringDelivery() {
            let shared = SharedAttempts<Int, Int, TestError>()
            let work = AttackWork<TestError>()
            let a = shared.attempt(for: 0, start: work.start)
            let b = shared.attempt(for: 0, start: work.start)
            let bDelivered = Counter()
            a.uponSuccess(.immediate) { _ in b.cancel() }
            b.uponSuccess(.immediate) { _ in bDelivered.increment() }
            work.run(0).writer.succeed(with: 0)
            #expect(a.peek() == .success(0))
            #expect(b.peek() != nil)
            #expect(work.run(0).stops.value == 0)
            #expect(shared.count == 0)
        }

        /// The last caller cancelling inside another attempt's delivery (a nested drain): the key
        /// is forgotten by the time `cancel()` returns, so `contains` says a new caller starts anew.
        @Test func cancellingInsideADeliveryForgetsTheKeyAtOnce() {
            let shared = SharedAttempts<Int, Int, TestError>()
            let work = AttackWork<TestError>()
            let trigger = HeldWriter<Int, TestError>()
            let seen = NSLocked<[String]>([])
            let first = shared.attempt(for: 0, start: work.start)
            trigger.attempt.uponSuccess(.immediate) { _ in
                first.cancel()
                let contained = shared.contains(0)
                let again = shared.attempt(for: 0, start: work.start)
                seen.withLock {
                    $0 = ["contains: \(contained)", "starts: \(work.starts)", "again cancelled: \(again.isCancelled)"]
                }
            }
            trigger.succeed(with: 0)
            #expect(seen.withLock { $0 } == ["contains: false", "starts: 2", "again cancelled: false"])
            work.finishAll()
        }

        /// A blocking wait that times out leaves without cancelling anything (guarantee 13).
        @Test func timedOutWaitOfTheOnlyCallerDoesNotStopTheWork() {
            let shared = SharedAttempts<Int, Int, TestError>()
            let work = AttackWork<TestError>()
            let caller = shared.attempt(for: 0, start: work.start)
            #expect(caller.wait(until: .now() + .milliseconds(10)) == nil)
            #expect(work.run(0).stops.value == 0)
            #expect(shared.contains(0))
            let joiner = shared.attempt(for: 0, start: work.start)
            #expect(work.starts == 1)
            work.finishAll()
            #expect(caller.peek() == .success(0) && joiner.peek() == .success(0))
        }

        /// A caller with a time limit gives up when its time is up; the others keep the run.
        @Test func callerTimingOutGivesUpOnlyItsShare() {
            let clock = VirtualTimeExecutor()
            let shared = SharedAttempts<Int, Int, TestError>()
            let work = AttackWork<TestError>()
            let limited = shared.attempt(for: 0, start: work.start).timeout(
                after: .seconds(1), upon: clock, failingWith: .timedOut)
            let staying = shared.attempt(for: 0, start: work.start)
            clock.advance(by: .seconds(1))
            #expect(limited.peek() == .failure(.timedOut))
            #expect(work.run(0).stops.value == 0)
            let onlyLimited = shared.attempt(for: 1, start: work.start).timeout(
                after: .seconds(1), upon: clock, failingWith: .timedOut)
            clock.advance(by: .seconds(1))
            #expect(onlyLimited.peek() == .failure(.timedOut))
            #expect(work.run(1).stops.value == 1, "the only caller timed out: the work stops")
            #expect(!shared.contains(1))
            work.finishAll()
            #expect(staying.peek() == .success(0))
        }

        /// `start` returning work that is cancelled already, or another key's caller that is
        /// cancelled later: every caller gets the cancellation, and the key is forgotten.
        @Test func startReturningCancelledWork() {
            let shared = SharedAttempts<Int, Int, TestError>()
            let cancelled = shared.attempt(for: 0) { _ in
                let writer = HeldWriter<Int, TestError>()
                writer.attempt.cancel()
                return writer.attempt
            }
            #expect(cancelled.peek() == .failure(.cancelled))
            #expect(shared.count == 0)

            let work = AttackWork<TestError>()
            let inner = shared.attempt(for: 1, start: work.start)
            let outer = shared.attempt(for: 2) { _ in inner }
            let outer2 = shared.attempt(for: 2) { _ in inner }
            inner.cancel()
            #expect(outer.peek() == .failure(.cancelled) && outer2.peek() == .failure(.cancelled))
            #expect(work.run(0).stops.value == 1)
            #expect(shared.count == 0)
        }

        // MARK: 5. Memory

        /// The table is not kept alive by its runs, and a run outliving its table ends quietly.
        @Test func tableNotKeptAliveByRuns() {
            weak var weakTable: SharedAttempts<Int, Int, TestError>?
            let writer = HeldWriter<Int, TestError>()
            let caller: Attempt<Int, TestError>
            do {
                let shared = SharedAttempts<Int, Int, TestError>(
                    keepingSuccessesFor: .seconds(5), upon: VirtualTimeExecutor())
                weakTable = shared
                caller = shared.attempt(for: 0) { _ in writer.attempt }
            }
            #expect(weakTable == nil)
            writer.succeed(with: 3)
            #expect(caller.peek() == .success(3))
        }

        /// The work and its captures are released when the run finishes or is cancelled; a
        /// caller's callbacks when it cancels, while the run goes on for another caller.
        @Test func capturesReleasedAfterFinishAndCancel() {
            let live = LiveCount()
            let shared = SharedAttempts<Int, Int, TestError>()
            let keptWriters = NSLocked<[HeldWriter<Int, TestError>]>([])
            do {
                let tracked = LifetimeTracked(live)
                let finished = shared.attempt(for: 0) { _ in
                    Attempt(upon: DispatchQueue.global()) { () throws(TestError) -> Int in
                        blackHole(tracked)
                        return 1
                    }
                }
                #expect(finished.value(within: 10) == .success(1))
            }
            DispatchQueue.global().sync {}
            // The global queue's closure is released right after it runs, possibly a little later.
            for _ in 0..<100 where live.value != 0 { usleep(1000) }
            #expect(live.value == 0, "the finished work's captures")

            let writer = HeldWriter<Int, TestError>()
            let staying = shared.attempt(for: 1) { _ in writer.attempt }
            do {
                let tracked = LifetimeTracked(live)
                let leaving = shared.attempt(for: 1) { _ in writer.attempt }
                leaving.uponSuccess(.immediate) { _ in blackHole(tracked) }
                leaving.cancel()
            }
            #expect(live.value == 0, "a cancelled caller's callbacks, while the run goes on")

            do {
                let tracked = LifetimeTracked(live)
                let cancelled = shared.attempt(for: 2) { _ in
                    Attempt { writer in
                        writer.onCancel { blackHole(tracked) }
                        let held = HeldWriter(writer)
                        keptWriters.withLock { $0.append(held) }  // pending until the test ends
                    }
                }
                cancelled.cancel()
            }
            #expect(live.value == 0, "the cancelled work's cancel handler")
            writer.succeed(with: 0)
            #expect(staying.peek() == .success(0))
        }

        /// The same with a failure type without a cancellation error: a caller that cancelled keeps
        /// its callbacks' captures as long as the run goes on, exactly as a cancelled `map` does.
        @Test func plainCallerCapturesReleasedAfterCancel() {
            let live = LiveCount()
            let shared = SharedAttempts<Int, Int, PlainError>()
            let writer = HeldWriter<Int, PlainError>()
            let staying = shared.attempt(for: 1) { _ in writer.attempt }
            do {
                let tracked = LifetimeTracked(live)
                let leaving = shared.attempt(for: 1) { _ in writer.attempt }
                leaving.uponSuccess(.immediate) { _ in blackHole(tracked) }
                leaving.cancel()
            }
            let sharedLive = live.value
            // The same on a plain attempt, for comparison: an attempt without a cancellation error
            // finishes only with its producer's result, and keeps its callbacks until then.
            let plainWriter = HeldWriter<Int, PlainError>()
            do {
                let tracked = LifetimeTracked(live)
                let leaving = plainWriter.attempt.map(upon: .immediate) { $0 }
                leaving.uponSuccess(.immediate) { _ in blackHole(tracked) }
                leaving.cancel()
            }
            let plainLive = live.value - sharedLive
            #expect(sharedLive == plainLive, "a cancelled shared caller keeps what a cancelled map keeps")
            writer.succeed(with: 0)
            plainWriter.succeed(with: 0)
            #expect(staying.peek() == .success(0))
            #expect(live.value == 0)
        }

        /// Kept results are released when they expire or are forgotten.
        @Test func keptResultsReleased() {
            let live = LiveCount()
            let clock = VirtualTimeExecutor()
            let shared = SharedAttempts<Int, LifetimeTracked, TestError>(keepingSuccessesFor: .seconds(1), upon: clock)
            _ = shared.attempt(for: 0) { _ in Attempt(succeededWith: LifetimeTracked(live)) }
            _ = shared.attempt(for: 1) { _ in Attempt(succeededWith: LifetimeTracked(live)) }
            #expect(live.value == 2)
            shared.forget(0)
            #expect(live.value == 1)
            clock.advance(by: .seconds(1))
            #expect(live.value == 0)
        }

        // MARK: 6. Deadlocks on the lock

        /// A key the table drops (its run cancelled or finished, forgotten, or its kept result
        /// expired) is not released while the table holds its lock: its deinit is user code, and
        /// may ask the table.
        @Test(.timeLimit(.minutes(1)))
        func keysAreNeverReleasedUnderTheLock() {
            let shared = SharedAttempts<ObjectKey, Int, TestError>()
            let blocked = NSLocked<[String]>([])
            let clock = VirtualTimeExecutor()
            let keeping = SharedAttempts<ObjectKey, Int, TestError>(keepingSuccessesFor: .seconds(1), upon: clock)
            func key(_ id: Int, _ name: String, in table: SharedAttempts<ObjectKey, Int, TestError>? = nil) -> ObjectKey
            {
                ObjectKey(
                    token: KeyToken(id) { [weak shared = table ?? shared] in
                        guard let shared else { return }
                        if !finishesElsewhere({ _ = shared.contains(ObjectKey(token: KeyToken(-1))) }) {
                            blocked.withLock { $0.append(name) }
                        }
                    })
            }
            // Each key below is held by the table's entry only, and released when the entry goes.
            shared.attempt(for: key(1, "released when its last caller cancels")) { _ in Attempt { _ in } }.cancel()

            let writer = HeldWriter<Int, TestError>()
            _ = shared.attempt(for: key(2, "released when its run finishes")) { _ in writer.attempt }
            writer.succeed(with: 1)

            // Forgotten by an equal key of another instance: the dictionary kept the first.
            let writer3 = HeldWriter<Int, TestError>()
            _ = shared.attempt(for: key(3, "released by forget")) { _ in writer3.attempt }
            shared.forget(ObjectKey(token: KeyToken(3)))

            _ = keeping.attempt(for: key(4, "released when its kept result expires", in: keeping)) { _ in
                Attempt(succeededWith: 1)
            }
            clock.advance(by: .seconds(1))

            #expect(blocked.withLock { $0 } == [], "a key's deinit ran while the table held its lock")
        }

        /// A kept value's deinit asking the table (expiry, forget, replacement): no deadlock.
        @Test(.timeLimit(.minutes(1)))
        func keptValueDeinitAsksTheTable() {
            let clock = VirtualTimeExecutor()
            let shared = SharedAttempts<Int, OnDeinit, TestError>(keepingSuccessesFor: .seconds(1), upon: clock)
            let asked = Counter()
            func value() -> OnDeinit {
                OnDeinit { [weak shared] in
                    if let shared, finishesElsewhere({ _ = shared.count }) {
                        asked.increment()
                    }
                }
            }
            _ = shared.attempt(for: 0) { _ in Attempt(succeededWith: value()) }
            _ = shared.attempt(for: 1) { _ in Attempt(succeededWith: value()) }
            shared.forget(0)
            clock.advance(by: .seconds(1))
            #expect(asked.value == 2)
        }

        /// The work's captures released while the last caller cancels, their deinit asking the
        /// table for the same key.
        @Test(.timeLimit(.minutes(1)))
        func workCaptureDeinitAsksTheTableForTheSameKey() {
            let shared = SharedAttempts<Int, Int, TestError>()
            let keptWriters = NSLocked<[HeldWriter<Int, TestError>]>([])
            let inner = NSLocked<Attempt<Int, TestError>?>(nil)
            let work = AttackWork<TestError>()
            do {
                let capture = OnDeinit {
                    let again = shared.attempt(for: 0, start: work.start)
                    inner.withLock { $0 = again }
                }
                let caller = shared.attempt(for: 0) { _ in
                    Attempt { writer in
                        writer.onCancel { blackHole(capture) }
                        let held = HeldWriter(writer)
                        keptWriters.withLock { $0.append(held) }  // pending until the test ends
                    }
                }
                caller.cancel()
            }
            let again = inner.withLock { $0 }
            #expect(again != nil)
            #expect(again?.isCancelled == false)
            work.finishAll()
            #expect(again?.peek() == .success(0))
        }

        // MARK: 7. Failure types

        @Test func failureTypeWithoutCancellationError() {
            let shared = SharedAttempts<Int, Int, PlainError>()
            let work = AttackWork<PlainError>()
            let leaving = shared.attempt(for: 0, start: work.start)
            let staying = shared.attempt(for: 0, start: work.start)
            let leftDelivered = Counter()
            leaving.uponSuccess(.immediate) { _ in leftDelivered.increment() }
            leaving.uponFailure(.immediate) { _ in leftDelivered.increment() }
            leaving.cancel()
            #expect(leaving.isCancelled)
            #expect(work.run(0).stops.value == 0)
            work.run(0).writer.fail(with: .failed(1))
            #expect(staying.peek() == .failure(.failed(1)))
            #expect(leftDelivered.value == 0)
            #expect(shared.count == 0)

            // Everyone leaves: the work is told to stop, the key is forgotten at once, and a
            // late result of the stopped work reaches no one.
            let a = shared.attempt(for: 1, start: work.start)
            let b = shared.attempt(for: 1, start: work.start)
            a.cancel()
            b.cancel()
            #expect(work.run(1).stops.value == 1)
            #expect(!shared.contains(1))
            let c = shared.attempt(for: 1, start: work.start)
            #expect(work.starts == 3)
            work.run(1).writer.succeed(with: 99)
            #expect(c.peek() == nil, "the stopped run's late success reached the new caller")
            work.run(2).writer.succeed(with: 2)
            #expect(c.peek() == .success(2))
            #expect(shared.count == 0)
        }

        @Test func neverFailingWork() {
            let clock = VirtualTimeExecutor()
            let shared = SharedAttempts<Int, Int, Never>(keepingSuccessesFor: .seconds(1), upon: clock)
            let writer = HeldWriter<Int, Never>()
            let stops = Counter()
            writer.onCancel { stops.increment() }
            let a = shared.attempt(for: 0) { _ in writer.attempt }
            a.cancel()
            #expect(stops.value == 1)
            #expect(shared.count == 0, "the cancelled run is forgotten")
            writer.succeed(with: 5)
            #expect(shared.count == 0, "a late success of a cancelled run is not kept")
            let w2 = HeldWriter<Int, Never>()
            let b = shared.attempt(for: 0) { _ in w2.attempt }
            w2.succeed(with: 6)
            #expect(b.peek() == .success(6))
            #expect(shared.attempt(for: 0) { _ in Attempt(succeededWith: 7) }.peek() == .success(6))
        }

        /// Work that fails with a cancellation error of its own (not cancelled): even with failures
        /// kept, later callers who never cancelled anything do not get a kept cancellation.
        @Test func workFailingWithACancellationErrorIsNotKeptAsAFailure() {
            let clock = VirtualTimeExecutor()
            let shared = SharedAttempts<Int, Int, any Error>(
                keepingSuccessesFor: .seconds(10), failuresFor: .seconds(10), upon: clock)
            _ = shared.attempt(for: 0) { _ in Attempt(failedWith: CancellationError()) }
            let later = shared.attempt(for: 0) { _ in Attempt(succeededWith: 1) }
            #expect(later.peek()?.successValue == 1, "a later caller got \(String(describing: later.peek()))")

            let typed = SharedAttempts<Int, Int, TestError>(
                keepingSuccessesFor: .seconds(10), failuresFor: .seconds(10), upon: clock)
            _ = typed.attempt(for: 0) { _ in Attempt(failedWith: .cancelled) }
            #expect(typed.attempt(for: 0) { _ in Attempt(succeededWith: 1) }.peek() == .success(1))
        }

        // MARK: SharedFutures

        /// A run whose work was dropped unfinished stays joined, as documented, until it is
        /// forgotten.
        @Test func sharedFuturesLostRunStaysJoinedUntilForgotten() {
            let shared = SharedFutures<Int, Int>()
            let first = shared.future(for: 0) { _ in Deferred<Int>() }  // the writer is dropped
            #expect(first.peek() == nil)
            #expect(shared.future(for: 0) { _ in Future(filledWith: 2) }.peek() == nil, "joined")
            shared.forget(0)
            #expect(shared.future(for: 0) { _ in Future(filledWith: 2) }.peek() == 2)
        }

        /// SharedFutures: a callback of the run asking for the same key, and start asking for its
        /// own key.
        @Test(.timeLimit(.minutes(1)))
        func sharedFuturesReentrancy() {
            let shared = SharedFutures<Int, Int>()
            let run = Deferred<Int>()
            let inner = NSLocked<Future<Int>?>(nil)
            let f = shared.future(for: 0) { _ in run }
            f.upon(.immediate) { _ in
                let again = shared.future(for: 0) { _ in Future(filledWith: 9) }
                inner.withLock { $0 = again }
            }
            run.fill(with: 1)
            let again = inner.withLock { $0 }
            #expect(again?.peek() == 9 || again?.peek() == 1)
            #expect(shared.count == 0)
        }

        /// SharedFutures: 100,000 callers on one key from many threads, one run.
        @Test(.timeLimit(.minutes(1)))
        func sharedFuturesFan() {
            let shared = SharedFutures<Int, Int>()
            let starts = Counter()
            let run = Deferred<Int>()
            let delivered = Counter()
            DispatchQueue.concurrentPerform(iterations: 64) { _ in
                for _ in 0..<(100_000 / 64) {
                    shared.future(for: 0) { _ in
                        starts.increment()
                        return run
                    }.upon(.immediate) { _ in delivered.increment() }
                }
            }
            run.fill(with: 1)
            #expect(starts.value == 1)
            #expect(delivered.value == 64 * (100_000 / 64))
            #expect(shared.count == 0)
        }
    }
}
