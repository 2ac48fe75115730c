import Deferred
import DeferredExecutors
import Dispatch
import Synchronization
import TestSupport
import Testing

/// `SharedAttempts`: one run per key while it is in flight, a cancellable attempt per caller, the
/// work cancelled when the last caller gives up and only then, the key forgotten when the run
/// ends, and results kept only for as long as asked.
@Suite struct SharedAttemptsTests {
    /// How a caller gives up on its attempt.
    enum GivingUp: String, CaseIterable, CustomTestStringConvertible {
        /// It calls `cancel()`.
        case cancelling
        /// Its task awaiting `get()` is cancelled.
        case cancellingItsTask

        var testDescription: String { rawValue }
    }

    /// A caller's attempt, and what giving up on it means.
    struct Caller {
        let attempt: Attempt<Int, TestError>
        let task: Task<Int, any Error>?

        init(_ attempt: Attempt<Int, TestError>, _ givingUp: GivingUp) {
            self.attempt = attempt
            task = givingUp == .cancellingItsTask ? Task { try await attempt.get() } : nil
        }

        /// Gives up, and returns once the caller has seen the cancellation.
        func giveUp() async {
            if let task {
                task.cancel()
                _ = await task.result
            } else {
                attempt.cancel()
            }
        }
    }

    @Test func aCallerWhoHasSeenTheResultDecidedOnAnotherThreadStartsANewRun() {
        let shared = SharedAttempts<Int, Int, TestError>()
        for round in 0..<500 {
            let result = shared.attempt(for: 0) { _ in
                let run = DeferredAttempt<Int, TestError>()
                DispatchQueue.global().async { run.succeed(with: round) }
                return run.attempt
            }.wait(until: .now() + 10)
            #expect(
                result == .success(round) && !shared.contains(0),
                "round \(round): the key is forgotten before the result is seen")
        }
    }

    @Test func concurrentCallersOfOneKeyShareOneRunAndEachGetsTheResult() {
        let work = CountedWork()
        let shared = SharedAttempts<String, Int, TestError>()
        let callers = (0..<3).map { _ in shared.attempt(for: "a", start: work.start) }
        #expect(work.starts == 1, "only the first caller starts the work")
        #expect(work.startedKeys == ["a"], "start is given the key")
        #expect(shared.count == 1 && shared.contains("a"))
        let delivered = Counter()
        for caller in callers {
            caller.uponSuccess(.immediate) { _ in delivered.increment() }
        }
        work.run(0).succeed(with: 7)
        for caller in callers {
            #expect(caller.peek() == .success(7))
        }
        #expect(delivered.value == 3)
        #expect(shared.count == 0 && !shared.contains("a"), "a finished run is forgotten")
        _ = shared.attempt(for: "a", start: work.start)
        #expect(work.starts == 2, "the next caller starts a new run")
    }

    @Test func differentKeysRunSeparately() {
        let work = CountedWork()
        let shared = SharedAttempts<String, Int, TestError>()
        let a = shared.attempt(for: "a", start: work.start)
        let b = shared.attempt(for: "b", start: work.start)
        #expect(work.starts == 2 && shared.count == 2)
        work.run(1).succeed(with: 2)
        #expect(b.peek() == .success(2) && a.peek() == nil)
        #expect(!shared.contains("b") && shared.contains("a"))
    }

    @Test(arguments: GivingUp.allCases)
    func aCallerThatGivesUpDoesNotAffectTheOthers(_ givingUp: GivingUp) async {
        let work = CountedWork()
        let shared = SharedAttempts<String, Int, TestError>()
        let leaving = Caller(shared.attempt(for: "a", start: work.start), givingUp)
        let staying = shared.attempt(for: "a", start: work.start)
        let withdrawn = Counter()
        if givingUp == .cancelling {
            // (A handler would need the attempt for good: a task giving up would not cancel it.)
            leaving.attempt.uponSuccess(.immediate) { _ in withdrawn.increment() }
        }
        await leaving.giveUp()
        #expect(leaving.attempt.peek() == .failure(.cancelled))
        #expect(work.stops == 0, "another caller still wants the work")
        #expect(shared.contains("a"))
        _ = shared.attempt(for: "a", start: work.start)
        #expect(work.starts == 1, "a new caller joins the run that still has a caller")
        work.run(0).succeed(with: 5)
        #expect(staying.peek() == .success(5))
        #expect(withdrawn.value == 0, "nothing reaches the caller that gave up")
    }

    @Test(arguments: GivingUp.allCases)
    func theWorkIsCancelledWhenEveryCallerHasGivenUpAndOnlyThen(_ givingUp: GivingUp) async {
        let work = CountedWork()
        let shared = SharedAttempts<String, Int, TestError>()
        let callers = (0..<3).map { _ in Caller(shared.attempt(for: "a", start: work.start), givingUp) }
        for caller in callers.dropLast() {
            await caller.giveUp()
            #expect(work.stops == 0)
        }
        await callers[2].giveUp()
        #expect(work.stops == 1, "the last caller's leaving cancels the work, once")
        #expect(work.run(0).peek() == .failure(.cancelled))
        #expect(!shared.contains("a"), "a cancelled run is forgotten at once")

        let next = shared.attempt(for: "a", start: work.start)
        #expect(work.starts == 2, "a caller after the cancellation starts a new run")
        work.run(1).succeed(with: 9)
        #expect(next.peek() == .success(9), "and gets that run's result, not the cancellation")
    }

    @Test func aCallerThatJoinsWhileTheLastOneLeavesEitherKeepsTheRunOrStartsANewOne() {
        // Sequentially: once the last caller has left, the run is dead for joiners.
        let work = CountedWork()
        let shared = SharedAttempts<String, Int, TestError>()
        let first = shared.attempt(for: "a", start: work.start)
        first.cancel()
        let second = shared.attempt(for: "a", start: work.start)
        #expect(work.starts == 2 && work.stops == 1)
        #expect(second.isCancelled == false)
        work.run(1).succeed(with: 1)
        #expect(second.peek() == .success(1))
    }

    @Test func workNobodyWantsByTheTimeItWouldStartNeverStarts() {
        let work = CountedWork()
        let shared = SharedAttempts<String, Int, TestError>()
        let inner = Mutex<Attempt<Int, TestError>?>(nil)
        let outer = shared.attempt(for: "outer") { _ in
            // Starting the inner key from inside start: the table's lock is not held.
            let attempt = shared.attempt(for: "inner", start: work.start)
            inner.withLock { $0 = attempt }
            return attempt
        }
        #expect(work.starts == 1 && shared.count == 2)
        outer.cancel()
        #expect(work.stops == 1, "cancelling the outer run cancels the inner run it waits for")
        #expect(shared.count == 0)
        #expect(inner.withLock { $0 }?.isCancelled == true)
    }

    @Test func aRunThatFinishesInStartIsDeliveredAndForgotten() {
        let shared = SharedAttempts<String, Int, TestError>()
        let done = shared.attempt(for: "a") { _ in Attempt(succeededWith: 3) }
        #expect(done.peek() == .success(3))
        #expect(shared.count == 0)
        let failed = shared.attempt(for: "a") { _ in Attempt(failedWith: .failed(1)) }
        #expect(failed.peek() == .failure(.failed(1)))
        #expect(shared.count == 0, "failures are never kept unless asked")
    }

    @Test func aFailureReachesEveryCallerAndIsForgotten() {
        let work = CountedWork()
        let shared = SharedAttempts<String, Int, TestError>()
        let callers = (0..<2).map { _ in shared.attempt(for: "a", start: work.start) }
        work.run(0).fail(with: .failed(4))
        #expect(callers.allSatisfy { $0.peek() == .failure(.failed(4)) })
        #expect(shared.count == 0)
    }

    @Test func aCancellationOfTheWorkItselfReachesEveryCaller() {
        let shared = SharedAttempts<String, Int, TestError>()
        let source = HeldWriter<Int, TestError>()
        let callers = (0..<2).map { _ in shared.attempt(for: "a") { _ in source.attempt } }
        source.attempt.cancel()
        #expect(callers.allSatisfy { $0.peek() == .failure(.cancelled) })
        #expect(shared.count == 0)
        let next = shared.attempt(for: "a") { _ in Attempt(succeededWith: 1) }
        #expect(next.peek() == .success(1), "the next caller starts anew")
    }

    @Test func successesAreKeptForTheirTimeOnTheGivenClock() {
        let clock = VirtualTimeExecutor()
        let work = CountedWork()
        let shared = SharedAttempts<String, Int, TestError>(keepingSuccessesFor: .seconds(10), upon: clock)
        let first = shared.attempt(for: "a", start: work.start)
        work.run(0).succeed(with: 8)
        #expect(first.peek() == .success(8))
        clock.advance(by: .seconds(9))
        let kept = shared.attempt(for: "a", start: work.start)
        #expect(kept.peek() == .success(8) && work.starts == 1, "a kept success is handed out")
        kept.cancel()
        #expect(shared.attempt(for: "a", start: work.start).peek() == .success(8), "cancelling a copy changes nothing")
        clock.advance(by: .seconds(1))
        #expect(shared.count == 0, "forgotten when its time is up")
        _ = shared.attempt(for: "a", start: work.start)
        #expect(work.starts == 2)
    }

    @Test func failuresAreKeptOnlyWhenAskedAndCancellationsNever() {
        let clock = VirtualTimeExecutor()
        let work = CountedWork()
        let successesOnly = SharedAttempts<String, Int, TestError>(keepingSuccessesFor: .seconds(10), upon: clock)
        _ = successesOnly.attempt(for: "a", start: work.start)
        work.run(0).fail(with: .failed(1))
        #expect(successesOnly.count == 0, "a failure is not kept by default")

        let both = SharedAttempts<String, Int, TestError>(
            keepingSuccessesFor: .seconds(10), failuresFor: .seconds(2), upon: clock)
        _ = both.attempt(for: "a", start: work.start)
        work.run(1).fail(with: .failed(2))
        #expect(both.attempt(for: "a", start: work.start).peek() == .failure(.failed(2)))
        #expect(work.starts == 2)
        clock.advance(by: .seconds(2))
        #expect(both.count == 0)

        both.attempt(for: "b", start: work.start).cancel()
        #expect(work.stops == 1 && both.count == 0, "a cancellation is never kept")
    }

    @Test func forgettingAKeyLetsTheRunGoOnForItsCallersWhileTheNextCallerStartsAnew() {
        let work = CountedWork()
        let shared = SharedAttempts<String, Int, TestError>()
        let old = shared.attempt(for: "a", start: work.start)
        shared.forget("a")
        #expect(shared.count == 0)
        let new = shared.attempt(for: "a", start: work.start)
        #expect(work.starts == 2)
        work.run(0).succeed(with: 1)
        #expect(old.peek() == .success(1))
        #expect(shared.contains("a"), "the old run's end does not forget the new run")
        work.run(1).succeed(with: 2)
        #expect(new.peek() == .success(2) && shared.count == 0)
    }

    @Test func forgettingAKeptResultDropsIt() {
        let clock = VirtualTimeExecutor()
        let shared = SharedAttempts<String, Int, TestError>(keepingSuccessesFor: .seconds(10), upon: clock)
        _ = shared.attempt(for: "a") { _ in Attempt(succeededWith: 1) }
        #expect(shared.count == 1)
        shared.forget("a")
        #expect(shared.attempt(for: "a") { _ in Attempt(succeededWith: 2) }.peek() == .success(2))
        clock.advance(by: .seconds(10))
        #expect(shared.count == 0, "the first result's timer does not forget the second")
    }

    @Test func anyErrorCallersCancelWithCancellationError() async {
        let shared = SharedAttempts<Int, Int, any Error>()
        let stopped = Counter()
        let kept = Mutex<HeldWriter<Int, any Error>?>(nil)  // the writer stays until the test ends
        let caller = shared.attempt(for: 1) { _ in
            Attempt { writer in
                writer.onCancel { stopped.increment() }
                let held = HeldWriter(writer)
                kept.withLock { $0 = held }
            }
        }
        caller.cancel()
        #expect(stopped.value == 1)
        #expect(caller.peek()?.failureValue is CancellationError)
    }

    @Test func aRunWhoseWorkWasLostIsOrphanedForEveryCallerAndLeavesTheTable() {
        // TestError has no `abandoned`: a dropped writer orphans its attempt, and the run with it.
        let shared = SharedAttempts<Int, Int, TestError>()
        let lost = shared.attempt(for: 1) { _ in Attempt { _ in } }
        #expect(lost.peek() == nil)
        #expect(shared.count == 0, "an orphaned run leaves the table")
        let next = shared.attempt(for: 1) { _ in Attempt(succeededWith: 3) }
        #expect(next.peek() == .success(3), "the next caller starts a new run")
    }

    @Test func aRunLostByItsProducerReachesEveryCallerAsAbandoned() {
        let shared = SharedAttempts<Int, Int, any Error>()
        let callers = (0..<2).map { _ in shared.attempt(for: 1) { _ in Attempt { _ in } } }
        #expect(callers.allSatisfy { $0.peek()?.failureValue is AbandonedError })
        #expect(shared.count == 0)
    }
}

/// Work that counts how often it was started and told to stop, and keeps each run's writer.
final class CountedWork: Sendable {
    private let writers = Mutex<[HeldWriter<Int, TestError>]>([])
    private let keys = Mutex<[String]>([])
    private let stopCount = Counter()

    /// Starts a run: the function to pass as `start`.
    var start: @Sendable (String) -> Attempt<Int, TestError> {
        { [self] key in
            let writer = HeldWriter<Int, TestError>()
            // Not `self`: the writer's attempt keeps its cancel handlers, and this object keeps
            // the writer.
            writer.onCancel { [stopCount] in stopCount.increment() }
            writers.withLock { $0.append(writer) }
            keys.withLock { $0.append(key) }
            return writer.attempt
        }
    }

    /// How many runs started.
    var starts: Int { writers.withLock { $0.count } }

    /// The keys the runs were started for.
    var startedKeys: [String] { keys.withLock { $0 } }

    /// How many runs were told to stop.
    var stops: Int { stopCount.value }

    /// The writer of the run started `index`th.
    func run(_ index: Int) -> HeldWriter<Int, TestError> {
        writers.withLock { $0[index] }
    }
}
