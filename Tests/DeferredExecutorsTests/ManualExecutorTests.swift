import DeferredExecutors
import Dispatch
import TestSupport
import Testing

@Suite struct ManualExecutorTests {
    @Test func nothingRunsUntilTheOwnerDrains() {
        let executor = ManualExecutor()
        let ran = Counter()
        Future(filledWith: 1).upon(executor) { _ in ran.increment() }
        #expect(ran.value == 0)
        #expect(executor.hasPendingWork)
        #expect(executor.runUntilIdle() == 1)
        #expect(ran.value == 1)
        #expect(!executor.hasPendingWork)
        #expect(executor.runUntilIdle() == 0)
    }

    @Test func runOneRunsTheOldestBody() {
        let executor = ManualExecutor()
        let recorder = OrderRecorder(count: 3)
        for index in 0..<3 {
            executor.submit { recorder.record(index) }
        }
        #expect(executor.runOne())
        #expect(recorder.order == [0])
        executor.submit { recorder.record(2) }
        #expect(executor.runOne())
        #expect(recorder.order == [0, 1], "bodies keep their order around runOne")
        #expect(executor.runOne())
        #expect(executor.runOne())
        #expect(!executor.runOne())
    }

    @Test func aBodyThatSubmitsMoreWorkIsDrainedInTheSameCall() {
        let executor = ManualExecutor()
        let recorder = OrderRecorder(count: 4)
        executor.submit {
            recorder.record(0)
            executor.submit {
                recorder.record(2)
                executor.submit { recorder.record(3) }
            }
        }
        executor.submit { recorder.record(1) }
        #expect(executor.runUntilIdle() == 4)
        #expect(recorder.order == [0, 1, 2, 3])
    }

    @Test func aBodyMayDrainItsOwnExecutor() {
        let executor = ManualExecutor()
        let recorder = OrderRecorder(count: 3)
        executor.submit {
            recorder.record(0)
            executor.submit { recorder.record(1) }
            executor.runUntilIdle()
            recorder.record(2)
        }
        executor.runUntilIdle()
        #expect(recorder.order == [0, 1, 2])
    }

    @Test func workSubmittedFromManyThreadsRunsExactlyOnce() {
        let executor = ManualExecutor()
        let ran = Counter()
        DispatchQueue.concurrentPerform(iterations: 2_000) { _ in
            executor.submit { ran.increment() }
        }
        #expect(executor.runUntilIdle() == 2_000)
        #expect(ran.value == 2_000)
    }

    @Test func handlersOfFuturesRunOnTheLoop() {
        let executor = ManualExecutor()
        let deferred = Deferred<Int>()
        let mapped = deferred.map(upon: executor) { $0 * 2 }
        deferred.fill(with: 21)
        #expect(mapped.peek() == nil, "the transform waits for the loop")
        executor.runUntilIdle()
        #expect(mapped.peek() == 42)
    }

    @Test func capturesAreReleasedAfterTheBodyRuns() {
        let executor = ManualExecutor()
        let live = LiveCount()
        do {
            let tracked = LifetimeTracked(live)
            executor.submit { _ = tracked }
        }
        #expect(live.value == 1)
        executor.runUntilIdle()
        #expect(live.value == 0)
    }

    @Test func pendingBodiesAreReleasedWithTheExecutor() {
        let live = LiveCount()
        do {
            let executor = ManualExecutor()
            let tracked = LifetimeTracked(live)
            executor.submit { _ = tracked }
        }
        #expect(live.value == 0)
    }

    /// A hundred thousand bodies, taken one at a time while more arrive, run exactly in
    /// submission order (each taken in O(1): a quadratic take would need minutes here).
    @Test func aHundredThousandBodiesRunInSubmissionOrder() {
        let executor = ManualExecutor()
        let order = OrderRecorder(count: 100_000)
        for index in 0..<50_000 {
            executor.submit { order.record(index) }
        }
        for _ in 0..<25_000 {
            executor.runOne()
        }
        for index in 50_000..<100_000 {
            executor.submit { order.record(index) }
        }
        #expect(executor.runUntilIdle() == 75_000)
        #expect(order.order == Array(0..<100_000))
    }
}
