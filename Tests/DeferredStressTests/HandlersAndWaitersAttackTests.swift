import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

/// A value that counts its live instances, so that a test sees memory return.
final class TrackedForAttacks: Sendable {
    let id: Int
    let tracked: LifetimeTracked
    init(_ id: Int, _ live: LiveCount) {
        self.id = id
        tracked = LifetimeTracked(live)
    }
}

/// An executor that counts what it is given and runs it at once.
final class CountingExecutorForAttacks: Executor {
    let submitted = Counter()
    func submit(_ body: @escaping @Sendable () -> Void) {
        submitted.increment()
        body()
    }
}

/// A failure type for the attacks: how to make one, and whether one is a cancellation.
struct FailureKindForAttacks<Failure: Error>: Sendable {
    let name: String
    let make: @Sendable (Int) -> Failure
    let isCancellation: @Sendable (Failure) -> Bool
    /// Whether `cancel()` can decide an attempt of this failure type.
    let cancels: Bool
}

let anyErrorKindForAttacks = FailureKindForAttacks<any Error>(
    name: "any Error", make: { TestError.failed($0) }, isCancellation: { $0 is CancellationError }, cancels: true)
let cancellableKindForAttacks = FailureKindForAttacks<TestError>(
    name: "CancellableError", make: { .failed($0) }, isCancellation: { $0 == .cancelled }, cancels: true)
let plainKindForAttacks = FailureKindForAttacks<PlainError>(
    name: "plain", make: { .failed($0) }, isCancellation: { _ in false }, cancels: false)

extension StressSuites {
    /// Attacks on the specialized cold paths and the handler layout of issue 54, through the public API only: waiter
    /// registries whose nodes are narrowed without a check, handler chunks released through
    /// their non-generic base, a fresh `ImmediateExecutor` on every `.immediate`, cancellation
    /// made inlinable, consumer links without exclusivity checks.
    @Suite struct HandlersAndWaitersAttackTests {
        // MARK: get() tasks cancelled at random while the value arrives

        final class GetSlot: Sendable {
            let values = Counter()
            let cancels = Counter()
            let wrong = Counter()
        }

        final class GetRound: Sendable {
            static let taskCount = 12
            let deferred: Deferred<TrackedForAttacks>
            let payload: TrackedForAttacks
            let slots: [GetSlot]
            let cancelled: [Bool]
            let tasks: [Task<Void, Never>]

            init(_ id: Int, live: LiveCount) {
                payload = TrackedForAttacks(id, live)
                // At least half cancel, so that the last ones to give up compact the registry.
                var cancelled = (0..<GetRound.taskCount).map { _ in Bool.random() }
                for index in 0..<(GetRound.taskCount / 2) {
                    cancelled[index] = true
                }
                cancelled.shuffle()
                self.cancelled = cancelled
                let deferred = Deferred<TrackedForAttacks>()
                let slots = (0..<GetRound.taskCount).map { _ in GetSlot() }
                self.deferred = deferred
                self.slots = slots
                tasks = slots.map { slot in
                    Task.immediate {
                        do {
                            let value = try await deferred.get()
                            if value.id == id { slot.values.increment() } else { slot.wrong.increment() }
                        } catch {
                            slot.cancels.increment()
                        }
                    }
                }
            }

            func cancelSome() {
                for (index, task) in tasks.enumerated() where cancelled[index] {
                    task.cancel()
                }
            }

            func fill() { deferred.fill(with: payload) }

            /// Checks the round once every task ended, and names its interleaving.
            func classify() -> String {
                var cancelledWithValue = 0
                var cancelledCount = 0
                for (index, slot) in slots.enumerated() {
                    let (values, cancels, wrong) = (slot.values.value, slot.cancels.value, slot.wrong.value)
                    if values + cancels + wrong != 1 || wrong != 0 {
                        Issue.record("task \(index): \(values) values, \(cancels) cancels, \(wrong) wrong")
                    }
                    if cancelled[index] {
                        cancelledCount += 1
                        cancelledWithValue += values
                    } else if values != 1 {
                        Issue.record("task \(index), never cancelled, got no value")
                    }
                }
                if cancelledWithValue == cancelledCount { return "fill first" }
                if cancelledWithValue == 0 { return "cancels first" }
                return "mixed"
            }
        }

        /// Many tasks in `get()` on one future, at least half cancelled while the value
        /// arrives: each task resumes exactly once, the ones never cancelled with the value, and
        /// every value and future goes once the rounds are dropped.
        @Test(.timeLimit(.minutes(2)))
        func getTasksCancelledAtRandomWhileTheValueArrives() async {
            let live = LiveCount()
            await RaceHarness.expectInterleavings(
                "get tasks cancelled vs fill",
                rounds: TestSize.attack.raceRounds / 2,
                expected: ["fill first", "cancels first", "mixed"]
            ) { size in
                let rounds = (0..<size).map { GetRound($0, live: live) }
                RaceHarness.run(rounds, left: { $0.cancelSome() }, right: { $0.fill() })
                var counts: [String: Int] = [:]
                for round in rounds {
                    for task in round.tasks {
                        await task.value
                    }
                    counts[round.classify(), default: 0] += 1
                }
                return counts
            }
            #expect(live.value == 0, "values still alive after every round was dropped")
        }

        // MARK: Timed waits and cancelled tasks racing the fill

        final class WaitRound: Sendable {
            let waits = NSLocked<[Int?]>([])
            let get: GetRound

            init(live: LiveCount) {
                get = GetRound(7, live: live)
            }

            /// Short timed waits, interleaved with cancelling tasks in `get()` on the same future.
            func waitAndCancel() {
                var results: [Int?] = []
                for index in 0..<GetRound.taskCount {
                    results.append(get.deferred.wait(until: .now() + .nanoseconds(Int.random(in: 0...20_000)))?.id)
                    if get.cancelled[index] {
                        get.tasks[index].cancel()
                    }
                }
                waits.withLock { $0 = results }
            }

            func classify() -> String {
                let results = waits.withLock { $0 }
                var seen = false
                for result in results {
                    if let result {
                        if result != 7 { Issue.record("a wait returned \(result)") }
                        seen = true
                    } else if seen {
                        Issue.record("a wait that began after one saw the value timed out: \(results)")
                    }
                }
                if get.deferred.wait(until: .now() + 10)?.id != 7 {
                    Issue.record("a wait after the fill did not see the value")
                }
                _ = get.classify()
                if results.allSatisfy({ $0 == nil }) { return "every wait timed out" }
                if results.allSatisfy({ $0 != nil }) { return "every wait saw the value" }
                return "some waits timed out"
            }
        }

        /// Threads in `wait(until:)` with short deadlines and tasks in `get()` that cancel, on
        /// one future, against its fill: the registry is compacted by both kinds of waiter giving
        /// up while the value arrives; no wait sees a wrong value or loses one it saw.
        @Test(.timeLimit(.minutes(2)))
        func timedWaitsAndCancelledTasksRacingTheFill() async {
            let live = LiveCount()
            await RaceHarness.expectInterleavings(
                "timed waits and cancels vs fill",
                rounds: TestSize.attack.raceRounds / 4,
                expected: ["every wait timed out", "every wait saw the value", "some waits timed out"]
            ) { size in
                let rounds = (0..<size).map { _ in WaitRound(live: live) }
                RaceHarness.run(
                    rounds, left: { $0.waitAndCancel() },
                    right: { round in
                        RaceHarness.pause(Int.random(in: 0..<20_000))
                        round.get.fill()
                    })
                var counts: [String: Int] = [:]
                for round in rounds {
                    for task in round.get.tasks {
                        await task.value
                    }
                    counts[round.classify(), default: 0] += 1
                }
                return counts
            }
            #expect(live.value == 0)
        }

        /// Waiters that all give up before the value (the registry compacted down to nothing
        /// again and again), then the fill: memory returns, and a last waiter still gets it.
        @Test(.timeLimit(.minutes(2)))
        func waitersThatAllGiveUpLeaveNothingBehind() async {
            let live = LiveCount()
            for round in 0..<TestSize.attackLoop(3_000) {
                let deferred = Deferred<TrackedForAttacks>()
                let tasks = (0..<8).map { _ in Task.immediate { try? await deferred.get() } }
                for task in tasks { task.cancel() }
                for task in tasks {
                    if await task.value != nil { Issue.record("a cancelled get got a value before the fill") }
                }
                #expect(deferred.peek() == nil)
                // The task returns the id only: a finished task keeps its result, and its own
                // thread may let go of the task just after `value` returns here.
                let last = Task.immediate { try? await deferred.get().id }
                deferred.fill(with: TrackedForAttacks(round, live))
                #expect(await last.value == round)
            }
            #expect(live.value == 0)
        }

        // MARK: An attempt's consumers cancelling while it succeeds

        final class ConsumersRound<Failure: Error>: Sendable {
            let kind: FailureKindForAttacks<Failure>
            let writer = HeldWriter<Int, Failure>()
            let consumers: [Attempt<Int, Failure>]
            let results: [NSLocked<Result<Int, Failure>?>]
            let delivered: [Counter]
            let successes: [Counter]
            let cancelCount: Int

            init(kind: FailureKindForAttacks<Failure>, consumerCount: Int) {
                self.kind = kind
                let source = writer.attempt
                source.upon(.immediate) { _ in }  // takes the inline slot
                let executor: any Executor = ImmediateExecutor.immediate
                consumers = (0..<consumerCount).map { index in
                    index % 2 == 0
                        ? source.map(upon: .immediate) { $0 + index }
                        : source.map(upon: executor) { $0 + index }
                }
                results = consumers.map { _ in NSLocked(nil) }
                delivered = consumers.map { _ in Counter() }
                successes = consumers.map { _ in Counter() }
                cancelCount = Int.random(in: 1...consumerCount)
                for (index, consumer) in consumers.enumerated() {
                    consumer.upon(.immediate) { [results, delivered] result in
                        results[index].withLock { $0 = result }
                        delivered[index].increment()
                    }
                    consumer.uponSuccess(.immediate) { [successes] value in
                        if value == 100 + index { successes[index].increment() }
                    }
                }
            }

            func cancel() {
                for consumer in consumers.prefix(cancelCount) {
                    consumer.cancel()
                }
            }

            func classify() -> String {
                var cancelledByCancel = 0
                for index in consumers.indices {
                    let isCancelled = index < cancelCount
                    if delivered[index].value != 1 {
                        Issue.record("\(kind.name): consumer \(index) delivered \(delivered[index].value) times")
                    }
                    let result = results[index].withLock { $0 }
                    switch result {
                    case .success(let value):
                        if value != 100 + index { Issue.record("\(kind.name): consumer \(index) got \(value)") }
                        if !isCancelled && successes[index].value != 1 {
                            Issue.record(
                                "\(kind.name): consumer \(index) success callback ran \(successes[index].value)")
                        }
                    case .failure(let error):
                        if !isCancelled || !kind.isCancellation(error) || !kind.cancels {
                            Issue.record(
                                "\(kind.name): consumer \(index) (cancelled: \(isCancelled)) failed with \(error)")
                        }
                        cancelledByCancel += 1
                        if successes[index].value != 0 {
                            Issue.record("\(kind.name): a cancelled consumer's success callback ran")
                        }
                    case nil:
                        Issue.record("\(kind.name): consumer \(index) never finished")
                    }
                    if successes[index].value > 1 {
                        Issue.record("\(kind.name): consumer \(index) success callback ran twice")
                    }
                }
                if cancelledByCancel == 0 { return "fill first" }
                return cancelledByCancel == cancelCount ? "cancels first" : "mixed"
            }
        }

        func consumersRace<Failure: Error>(_ kind: FailureKindForAttacks<Failure>) {
            RaceHarness.expectInterleavings(
                "\(kind.name) consumers cancel vs success",
                rounds: TestSize.attack.raceRounds,
                expected: kind.cancels ? ["fill first", "cancels first", "mixed"] : ["fill first"],
                setup: { ConsumersRound(kind: kind, consumerCount: Int.random(in: 2...40)) },
                left: { $0.cancel() },
                right: { _ = $0.writer.succeed(with: 100) },
                classify: { $0.classify() })
        }

        /// An attempt with many consumers (the second and later in consumer links), some of
        /// which cancel while it succeeds: each consumer reports once, with its value or (when
        /// its type can) its cancellation, never a success callback after its cancellation.
        @Test(.timeLimit(.minutes(2)))
        func consumersCancellingWhileTheAttemptSucceedsAnyError() { consumersRace(anyErrorKindForAttacks) }

        @Test(.timeLimit(.minutes(2)))
        func consumersCancellingWhileTheAttemptSucceedsCancellableError() { consumersRace(cancellableKindForAttacks) }

        @Test(.timeLimit(.minutes(2)))
        func consumersCancellingWhileTheAttemptSucceedsPlainError() { consumersRace(plainKindForAttacks) }

        // MARK: Shared runs with 1, 2 and 10 callers cancelling while the run ends

        final class SharedRound<Failure: Error>: Sendable {
            let kind: FailureKindForAttacks<Failure>
            let fails: Bool
            let shared = SharedAttempts<Int, Int, Failure>()
            let work = AttackWork<Failure>()
            let callers: [Attempt<Int, Failure>]
            let results: [NSLocked<Result<Int, Failure>?>]
            let delivered: [Counter]
            let callbacks: [Counter]
            let cancelled: [Bool]

            init(kind: FailureKindForAttacks<Failure>, callers count: Int, fails: Bool) {
                self.kind = kind
                self.fails = fails
                let (shared, work) = (shared, work)
                callers = (0..<count).map { _ in shared.attempt(for: 0, start: work.start) }
                results = callers.map { _ in NSLocked(nil) }
                delivered = callers.map { _ in Counter() }
                callbacks = callers.map { _ in Counter() }
                // Every caller cancels in a third of the rounds, so that the run is stopped.
                cancelled = Int.random(in: 0..<3) == 0 ? callers.map { _ in true } : callers.map { _ in Bool.random() }
                let executor: any Executor = ImmediateExecutor.immediate
                for (index, caller) in callers.enumerated() {
                    caller.upon(.immediate) { [results, delivered] result in
                        results[index].withLock { $0 = result }
                        delivered[index].increment()
                    }
                    caller.uponSuccess(executor) { [callbacks] _ in callbacks[index].increment() }
                    caller.uponFailure(.immediate) { [callbacks] _ in callbacks[index].increment() }
                }
            }

            func cancel() {
                for (index, caller) in callers.enumerated() where cancelled[index] {
                    caller.cancel()
                }
            }

            /// Whether the run's producer delivered its result (`false`: the run was stopped first).
            let delivered0 = NSLocked<Bool?>(nil)

            func end() {
                let accepted =
                    fails ? work.run(0).writer.fail(with: kind.make(5)) : work.run(0).writer.succeed(with: 0)
                delivered0.withLock { $0 = accepted }
            }

            func classify() -> String {
                if work.starts != 1 {
                    Issue.record("\(kind.name): \(work.starts) starts")
                }
                // A run stopped before it ended still ends when its producer fills it (a
                // plain failure type's callers then get its result).
                work.finishAll()
                var cancellations = 0
                for index in callers.indices {
                    if delivered[index].value != 1 {
                        Issue.record("\(kind.name): caller \(index) delivered \(delivered[index].value) times")
                    }
                    if callbacks[index].value > 1 {
                        Issue.record("\(kind.name): caller \(index) callbacks ran \(callbacks[index].value) times")
                    }
                    let result = results[index].withLock { $0 }
                    switch result {
                    case .success(let value):
                        if fails || value != 0 { Issue.record("\(kind.name): caller \(index) got \(value)") }
                        if !cancelled[index] && callbacks[index].value != 1 {
                            Issue.record("\(kind.name): caller \(index) success callback not run")
                        }
                    case .failure(let error):
                        if kind.isCancellation(error) {
                            cancellations += 1
                            if !cancelled[index] || !kind.cancels {
                                Issue.record(
                                    "\(kind.name): caller \(index) (cancelled: \(cancelled[index])) got a cancellation")
                            }
                            if callbacks[index].value != 0 {
                                Issue.record("\(kind.name): a cancelled caller's failure callback ran")
                            }
                        } else {
                            if !fails { Issue.record("\(kind.name): caller \(index) failed with \(error)") }
                            if !cancelled[index] && callbacks[index].value != 1 {
                                Issue.record("\(kind.name): caller \(index) failure callback not run")
                            }
                        }
                    case nil:
                        Issue.record("\(kind.name): caller \(index) never finished")
                    }
                }
                let stops = work.run(0).stops.value
                if stops > 1 { Issue.record("\(kind.name): the run stopped \(stops) times") }
                if cancelled.contains(false) && stops != 0 {
                    Issue.record("\(kind.name): a run with a caller left was stopped")
                }
                // The producer's cancel handlers run once if the run was stopped before it
                // delivered, and never if it delivered.
                let producerDelivered = delivered0.withLock { $0 }!
                if kind.cancels && stops != (producerDelivered ? 0 : 1) {
                    Issue.record("\(kind.name): producer delivered: \(producerDelivered), stops: \(stops)")
                }
                if kind.cancels && !producerDelivered && cancellations != callers.count {
                    Issue.record("\(kind.name): the run was stopped, and only \(cancellations) callers cancelled")
                }
                if shared.count != 0 {
                    Issue.record("\(kind.name): the ended run's key is still there")
                }
                // A caller after the run ended starts a new one.
                let again = shared.attempt(for: 0, start: work.start)
                if work.starts != 2 {
                    Issue.record("\(kind.name): asking again after the end made \(work.starts) starts")
                }
                work.run(1).writer.succeed(with: 1)
                if again.peek()?.successValue != 1 {
                    Issue.record("\(kind.name): the new run's caller got \(String(describing: again.peek()))")
                }
                if shared.count != 0 {
                    Issue.record("\(kind.name): the second run's key is still there")
                }
                if cancellations == 0 { return "ended first" }
                return cancellations == cancelled.filter({ $0 }).count ? "cancels first" : "mixed"
            }
        }

        func sharedRace<Failure: Error>(_ kind: FailureKindForAttacks<Failure>, callers: Int, fails: Bool) {
            let expected: Set<String> =
                !kind.cancels
                ? ["ended first"]
                : callers == 1 ? ["ended first", "cancels first"] : ["ended first", "cancels first", "mixed"]
            RaceHarness.expectInterleavings(
                "shared \(kind.name), \(callers) callers cancel vs \(fails ? "failure" : "success")",
                rounds: TestSize.attack.raceRounds / 2,
                expected: expected,
                setup: { SharedRound(kind: kind, callers: callers, fails: fails) },
                left: { $0.cancel() },
                right: { $0.end() },
                classify: { $0.classify() })
        }

        /// A shared run's callers (1, 2 or 10) cancelling while it succeeds or fails: each caller
        /// reports once; a run is stopped only once every caller cancelled; the key goes when the
        /// run ends, and a caller after that starts a new run.
        @Test(.timeLimit(.minutes(3)), arguments: [1, 2, 10], [false, true])
        func sharedCallersCancellingAnyError(callers: Int, fails: Bool) {
            sharedRace(anyErrorKindForAttacks, callers: callers, fails: fails)
        }

        @Test(.timeLimit(.minutes(3)), arguments: [1, 2, 10], [false, true])
        func sharedCallersCancellingCancellableError(callers: Int, fails: Bool) {
            sharedRace(cancellableKindForAttacks, callers: callers, fails: fails)
        }

        @Test(.timeLimit(.minutes(3)), arguments: [1, 2, 10], [false, true])
        func sharedCallersCancellingPlainError(callers: Int, fails: Bool) {
            sharedRace(plainKindForAttacks, callers: callers, fails: fails)
        }

        // MARK: Handler chunks

        final class ChunkRound: Sendable {
            let deferred = Deferred<TrackedForAttacks>()
            let payload: TrackedForAttacks
            let runs: [Counter]
            let executor = CountingExecutorForAttacks()
            let stored: any Executor = ImmediateExecutor.immediate

            init(live: LiveCount, handlers: Int) {
                payload = TrackedForAttacks(1, live)
                runs = (0..<handlers).map { _ in Counter() }
            }

            func register() {
                for (index, counter) in runs.enumerated() {
                    switch index % 3 {
                    case 0: deferred.upon(.immediate) { value in if value.id == 1 { counter.increment() } }
                    case 1: deferred.upon(stored) { value in if value.id == 1 { counter.increment() } }
                    default: deferred.upon(executor) { value in if value.id == 1 { counter.increment() } }
                    }
                }
            }

            func classify() -> String {
                for (index, counter) in runs.enumerated() where counter.value != 1 {
                    Issue.record("handler \(index) ran \(counter.value) times")
                }
                return "done"
            }
        }

        /// More handlers than the inline slot (so chunks) registered on two threads while the
        /// value arrives on one: each runs once, and the storage, its chunks and value go.
        @Test(.timeLimit(.minutes(2)))
        func chunkedHandlersRegisteredWhileTheValueArrives() {
            let live = LiveCount()
            RaceHarness.expectInterleavings(
                "chunk registration vs fill",
                rounds: TestSize.attack.raceRounds / 2,
                expected: ["done"],
                setup: { ChunkRound(live: live, handlers: Int.random(in: 2...140)) },
                left: { $0.register() },
                right: { round in
                    RaceHarness.pause(Int.random(in: 0..<4_000))
                    round.deferred.fill(with: round.payload)
                },
                classify: { $0.classify() })
            #expect(live.value == 0)
        }

        /// Filled storages with chunks of every size, released on another thread than the one
        /// that filled them, and unfilled ones released with their chunks.
        @Test(.timeLimit(.minutes(2)))
        func chunkedStoragesReleasedFilledAndUnfilled() {
            let live = LiveCount()
            let ran = Counter()
            /// A filled storage with `handlers` handlers, whose only reference is in the box.
            func filledBox(_ round: Int, handlers: Int) -> NSLocked<Deferred<TrackedForAttacks>?> {
                let filled = Deferred<TrackedForAttacks>()
                for _ in 0..<handlers {
                    filled.upon(.immediate) { _ in ran.increment() }
                }
                filled.fill(with: TrackedForAttacks(round, live))
                return NSLocked(filled)
            }
            for round in 0..<TestSize.attackLoop(6_000) {
                let handlers = 1 + round % 200
                let box = filledBox(round, handlers: handlers)
                DispatchQueue.global().sync { box.withLock { $0 = nil } }
                let unfilled = Deferred<TrackedForAttacks>()
                for _ in 0..<handlers {
                    let witness = TrackedForAttacks(0, live)
                    unfilled.upon(.immediate) { _ in blackHole(witness) }
                }
                let mapped = unfilled.map(upon: .immediate) { $0.id }
                blackHole(mapped)
            }
            #expect(live.value == 0)
            #expect(ran.value == (0..<TestSize.attackLoop(6_000)).reduce(0) { $0 + 1 + $1 % 200 })
        }

        // MARK: .immediate through any Executor

        /// `.immediate` stored as `any Executor` and reused: every way to hand it to a future or
        /// an attempt runs the body in place, on the thread that fills, before the fill returns,
        /// once; a success callback on a cancelled attempt never runs.
        @Test func immediateThroughAnyExecutor() {
            let stored: any Executor = ImmediateExecutor.immediate
            let executors: [any Executor] = [stored, ImmediateExecutor(), ImmediateExecutor.immediate, stored]
            for executor in executors {
                // A pending future, then a filled one.
                let deferred = Deferred<Int>()
                let ran = Counter()
                for _ in 0..<50 { deferred.upon(executor) { if $0 == 3 { ran.increment() } } }
                let mapped = deferred.map(upon: executor) { $0 * 2 }
                #expect(ran.value == 0)
                deferred.fill(with: 3)
                #expect(ran.value == 50)
                #expect(mapped.peek() == 6)
                deferred.upon(executor) { if $0 == 3 { ran.increment() } }
                #expect(ran.value == 51)

                // Attempts, pending and finished, and cancelled.
                let writer = DeferredAttempt<Int, TestError>()
                let successes = Counter()
                writer.attempt.uponSuccess(executor) { if $0 == 4 { successes.increment() } }
                let stage = writer.attempt.map(upon: executor) { $0 + 1 }
                stage.uponSuccess(executor) { if $0 == 5 { successes.increment() } }
                let cancelledStage = writer.attempt.map(upon: executor) { $0 + 1 }
                cancelledStage.uponSuccess(executor) { _ in Issue.record("a cancelled stage's callback ran") }
                cancelledStage.cancel()
                #expect(cancelledStage.peek() == .failure(.cancelled))
                _ = writer.succeed(with: 4)
                #expect(successes.value == 2)
                writer.attempt.uponSuccess(executor) { if $0 == 4 { successes.increment() } }
                writer.attempt.uponFailure(executor) { _ in Issue.record("a failure callback on a success") }
                #expect(successes.value == 3)
                let finished = Attempt<Int, TestError>(succeededWith: 9)
                finished.cancel()
                finished.uponSuccess(executor) { _ in Issue.record("a cancelled attempt's callback ran") }
                let fresh = Attempt<Int, TestError>(succeededWith: 9)
                fresh.uponSuccess(executor) { if $0 == 9 { successes.increment() } }
                #expect(successes.value == 4)
            }
            #expect((stored as? ImmediateExecutor) != nil)
        }

        /// Immediate handlers, cancel handlers and an awaiting task on storages that
        /// `PendingFutures` records, then a dump: the dump names them, and filling runs them.
        @Test func immediateHandlersWhileTracking() async {
            PendingFutures.isTracking = true
            defer { PendingFutures.isTracking = false }
            let deferred = Deferred<Int>()
            let ran = Counter()
            for _ in 0..<40 { deferred.upon(.immediate) { _ in ran.increment() } }
            let stored: any Executor = ImmediateExecutor.immediate
            deferred.upon(stored) { _ in ran.increment() }
            let writer = DeferredAttempt<Int, TestError>()
            let stopped = Counter()
            writer.onCancel { stopped.increment() }
            let stage = writer.attempt.map(upon: .immediate) { $0 }
            stage.uponSuccess(.immediate) { _ in ran.increment() }
            let awaiting = Task.immediate { await deferred.value }
            let getting = Task.immediate { try? await deferred.get() }
            let dump = "\(PendingFutures.dump())"
            #expect(dump.contains(".immediate"), "\(dump)")
            stage.cancel()
            #expect(stopped.value == 1)
            deferred.fill(with: 1)
            #expect(ran.value == 41)
            #expect(await awaiting.value == 1)
            #expect(await getting.value == 1)
            _ = writer.succeed(with: 0)
        }

        // MARK: Deep chains

        /// 100,000 stages of `map(upon: .immediate)` filled, and 100,000 attempt stages
        /// cancelled from the end and from the root, released on a small stack.
        @Test(.timeLimit(.minutes(2)), .skippedUnderThreadSanitizer)
        func deepImmediateChainsFilledCancelledAndReleased() async {
            let depth = max(100_000, TestSize.attack.depth)
            let ok = await onDeepStack("deep immediate chains", size: TestSize.attack) { () -> Bool in
                var ok = true
                do {
                    let root = Deferred<Int>()
                    var future = root.map(upon: .immediate) { $0 + 1 }
                    for _ in 1..<depth { future = future.map(upon: .immediate) { $0 + 1 } }
                    let seen = Counter()
                    future.upon(.immediate) { if $0 == depth { seen.increment() } }
                    root.fill(with: 0)
                    ok = ok && seen.value == 1 && future.peek() == depth
                }
                do {
                    let writer = DeferredAttempt<Int, TestError>()
                    let stopped = Counter()
                    writer.onCancel { stopped.increment() }
                    var attempt = writer.attempt.map(upon: .immediate) { $0 + 1 }
                    for _ in 1..<depth { attempt = attempt.map(upon: .immediate) { $0 + 1 } }
                    attempt.uponSuccess(.immediate) { _ in Issue.record("cancelled chain's callback ran") }
                    attempt.cancel()
                    ok = ok && stopped.value == 1 && attempt.peek() == .failure(.cancelled)
                    _ = writer.succeed(with: 0)
                }
                do {
                    let writer = DeferredAttempt<Int, any Error>()
                    var attempt = writer.attempt.map(upon: .immediate) { $0 + 1 }
                    for _ in 1..<depth { attempt = attempt.map(upon: .immediate) { $0 + 1 } }
                    let last = attempt
                    let cancelled = Counter()
                    last.upon(.immediate) {
                        if case .failure(let error) = $0, error is CancellationError { cancelled.increment() }
                    }
                    writer.attempt.cancel()
                    ok = ok && cancelled.value == 1
                }
                do {
                    // Unfilled and dropped: the chain is released pending.
                    let root = Deferred<Int>()
                    var future = root.map(upon: .immediate) { $0 + 1 }
                    for _ in 1..<depth { future = future.map(upon: .immediate) { $0 + 1 } }
                    future.upon(.immediate) { _ in }
                }
                return ok
            }
            #expect(ok)
        }
    }
}
