import DeferredExecutors
import Foundation
import TestSupport
import Testing

@Suite struct OperationQueueExecutorTests {
    @Test func eachBodyRunsOnceAsAnOperation() {
        let queue = OperationQueue()
        let deferred = Deferred<Int>()
        let ran = Counter()
        for _ in 0..<50 {
            deferred.upon(queue) { _ in ran.increment() }
        }
        deferred.fill(with: 1)
        deferred.upon(queue) { _ in ran.increment() }
        queue.waitUntilAllOperationsAreFinished()
        #expect(ran.value == 51)
    }

    @Test func aSerialQueueRunsBodiesInOrder() {
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        let recorder = OrderRecorder(count: 200)
        for index in 0..<200 {
            queue.submit { recorder.record(index) }
        }
        queue.waitUntilAllOperationsAreFinished()
        #expect(recorder.order == Array(0..<200))
    }

    @Test func aSuspendedQueueHoldsBodiesUntilResumed() {
        let queue = OperationQueue()
        queue.isSuspended = true
        let ran = Counter()
        Future(filledWith: 1).upon(queue) { _ in ran.increment() }
        Thread.sleep(forTimeInterval: 0.02)
        #expect(ran.value == 0, "a suspended queue starts no operation")
        #expect(queue.operationCount == 1)
        queue.isSuspended = false
        queue.waitUntilAllOperationsAreFinished()
        #expect(ran.value == 1)
    }

    @Test func aBarrierWaitsForBodiesSubmittedBeforeIt() {
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 4
        let ran = Counter()
        for _ in 0..<20 {
            queue.submit {
                Thread.sleep(forTimeInterval: 0.001)
                ran.increment()
            }
        }
        let atBarrier = Deferred<Int>()
        queue.addBarrierBlock { atBarrier.fill(with: ran.value) }
        #expect(atBarrier.value() == 20)
    }

    @Test func capturesAreReleasedAfterTheOperationRuns() {
        let queue = OperationQueue()
        let live = LiveCount()
        do {
            let tracked = LifetimeTracked(live)
            Future(filledWith: 1).upon(queue) { _ in _ = tracked }
        }
        queue.waitUntilAllOperationsAreFinished()
        // The queue releases a finished operation shortly after it reports it finished.
        for _ in 0..<500 where live.value != 0 {
            Thread.sleep(forTimeInterval: 0.01)
        }
        #expect(live.value == 0)
    }
}
