import Deferred
import DeferredExecutors
import Dispatch
import TestSupport
import Testing

/// Guarantee 16: a stage that decides lets go at once.
///
/// When a time limit passes, the work it gave up on is told to stop before any delivery of the
/// timed-out attempt, or of any attempt derived from it, runs: whatever the derived stage,
/// whatever executor runs it, drained or not.
@Suite struct StageLetsGoTests {
    /// A producer whose cancel handler counts its runs, and the limit on it.
    final class LimitedWork: Sendable {
        let writer = DeferredAttempt<Int, TestError>()
        let stopped = Counter()
        let clock = VirtualTimeExecutor()
        let limited: Attempt<Int, TestError>

        init() {
            writer.onCancel { [stopped] in stopped.increment() }
            limited = writer.attempt.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
        }
    }

    @Test(arguments: AttemptKind.allCases)
    func anyStageDerivedFromATimedOutAttemptLetsTheWorkGo(_ kind: AttemptKind) {
        let work = LimitedWork()
        let queue = DispatchQueue(label: "delays")
        let before = Sighting()
        work.limited.upon(.immediate) { _ in before.record(work.stopped.value) }
        let derived = kind.stage(after: work.limited, delayingOn: queue)
        let after = Sighting()
        derived.upon(.immediate) { _ in after.record(work.stopped.value) }
        work.clock.advance(by: .seconds(1))
        #expect(work.stopped.value == 1, "the work is told to stop as the limit passes")
        #expect(work.writer.attempt.isCancelled)
        #expect(before.count == 1 && before.value == 1, "a callback added before the stage saw it stopped")
        #expect(ExecutorKind.immediate.make().settle { after.count == 1 })
        #expect(after.value == 1, "the derived stage's callback saw it stopped")
        #expect(work.stopped.value == 1, "once")
    }

    /// A step on each kind of executor, not run yet when the limit passes: the work is stopped
    /// already when the executor gets to it.
    @Test(arguments: ExecutorKind.allCases, ["map", "recover", "andThen", "fallback", "uponFailure", "firstSucceeded"])
    func aStageOnAnExecutorNotYetDrainedFindsTheWorkStopped(_ executorKind: ExecutorKind, stage: String) {
        let work = LimitedWork()
        let under = executorKind.make()
        let executor = under.executor
        let saw = Sighting()
        let record: @Sendable (Result<Int, TestError>) -> Void = { _ in saw.record(work.stopped.value) }
        switch stage {
        case "map":
            work.limited.map(upon: executor) { $0 }.upon(.immediate, execute: record)
        case "recover":
            work.limited.recover(upon: executor) { _ in
                saw.record(work.stopped.value)
                return 0
            }.upon(.immediate) { _ in }
        case "andThen":
            work.limited.andThen(upon: executor) { Attempt(succeededWith: $0) }.upon(.immediate, execute: record)
        case "fallback":
            work.limited.fallback(upon: executor) { _ in
                saw.record(work.stopped.value)
                return Attempt(succeededWith: 0)
            }.upon(.immediate) { _ in }
        case "uponFailure":
            work.limited.uponFailure(executor) { _ in saw.record(work.stopped.value) }
        default:
            let other = DeferredAttempt<Int, TestError>()
            let first = [work.limited, other.attempt].firstSucceeded()
            work.clock.advance(by: .seconds(1))
            #expect(work.stopped.value == 1, "the join still waits, but not on the timed-out work")
            #expect(first.peek() == nil)
            other.succeed(with: 3)
            #expect(first.peek() == .success(3))
            return
        }
        work.clock.advance(by: .seconds(1))
        #expect(work.stopped.value == 1, "stopped before the executor runs anything")
        #expect(under.settle { saw.count == 1 })
        #expect(saw.value == 1)
    }

    /// A limit of zero or less has passed as it is set, whatever executor measures it: the
    /// attempt is decided, and the work told to stop, before `timeout` returns, so that nobody
    /// who reads the timeout finds the work still running.
    @Test(arguments: ExecutorKind.allCases, [Duration.zero, .seconds(-5)])
    func aLimitPassedAsItIsSetDecidesAndStopsBeforeItReturns(_ executorKind: ExecutorKind, limit: Duration) {
        let under = executorKind.make()
        let writer = DeferredAttempt<Int, TestError>()
        let stopped = Counter()
        writer.onCancel { stopped.increment() }
        let limited = writer.attempt.timeout(after: limit, upon: under.scheduling, failingWith: .timedOut)
        #expect(limited.peek() == .failure(.timedOut))
        #expect(stopped.value == 1)
        #expect(writer.attempt.isCancelled)
        let later = Counter()
        under.scheduling.submit(after: .zero) { later.increment() }
        #expect(under.settleAsTimePasses { later.value == 1 })
        #expect(stopped.value == 1, "once, also after the executor ran")
    }

    /// A delay after a limit waits on the decided attempt only: the work stops as the limit
    /// passes, not once the delay ends.
    @Test func aDelayAfterALimitDoesNotKeepTheWork() {
        let work = LimitedWork()
        let delayed = work.limited.delay(by: .seconds(5), upon: work.clock)
        work.clock.advance(by: .seconds(1))
        #expect(work.stopped.value == 1)
        #expect(delayed.peek() == nil)
        work.clock.advance(by: .seconds(5))
        #expect(delayed.peek() == .failure(.timedOut))
        #expect(work.stopped.value == 1)
    }

    /// Another consumer of the source keeps the work: the limit lets go of it only for itself.
    @Test func aLimitLeavesTheWorkToAnotherConsumer() {
        let work = LimitedWork()
        let other = work.writer.attempt.map(upon: .immediate) { $0 * 2 }
        let derived = work.limited.map(upon: .immediate) { $0 }
        work.clock.advance(by: .seconds(1))
        #expect(derived.peek() == .failure(.timedOut))
        #expect(work.stopped.value == 0)
        let succeeded = work.writer.succeed(with: 4)
        #expect(succeeded)
        #expect(other.peek() == .success(8))
    }
}
