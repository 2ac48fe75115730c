import Deferred
import Dispatch
import TestSupport
import Testing

@Suite struct ExecutorTests {
    @Test func theImmediateExecutorRunsTheBodyBeforeSubmitReturns() {
        let ran = Counter()
        ImmediateExecutor().submit { ran.increment() }
        #expect(ran.value == 1)
        let executor: ImmediateExecutor = .immediate
        executor.submit { ran.increment() }
        #expect(ran.value == 2)
    }

    @Test func aDispatchQueueRunsSubmittedBodiesAsynchronouslyInOrder() {
        let queue = DispatchQueue(label: "serial")
        let recorder = OrderRecorder(count: 100)
        for index in 0..<100 {
            queue.submit { recorder.record(index) }
        }
        queue.flush()
        #expect(recorder.order == Array(0..<100))
    }

    @Test func executorsCanBeNamedWithLeadingDotSyntax() {
        let deferred = Deferred(filledWith: 1)
        let onGlobal = Deferred<Int>()
        deferred.upon(.global()) { onGlobal.fill(with: $0) }
        deferred.upon(.global(qos: .utility)) { _ in }
        deferred.upon(.main) { _ in }  // Runs once the main queue is serviced; must compile and be accepted.
        #expect(onGlobal.value() == 1)
    }

    @Test func aUserWrittenExecutorReceivesEachHandlerOnce() {
        let executor = CountingExecutor()
        let deferred = Deferred<Int>()
        let received = Counter()
        deferred.upon(executor) { _ in received.increment() }
        deferred.upon(executor) { _ in received.increment() }
        deferred.fill(with: 1)
        deferred.upon(executor) { _ in received.increment() }
        executor.queue.flush()
        #expect(executor.submitted.value == 3)
        #expect(received.value == 3)
    }

    @Test func anExecutorCanBeUsedThroughAnExistential() {
        let executors: [any Executor] = [ImmediateExecutor(), DispatchQueue(label: "existential"), CountingExecutor()]
        let deferred = Deferred<Int>()
        let received = Counter()
        let done = (0..<executors.count).map { _ in Deferred<Void>() }
        for (executor, finished) in zip(executors, done) {
            deferred.upon(executor) { _ in
                received.increment()
                finished.fill()
            }
        }
        deferred.fill(with: 1)
        #expect(done.allFilled().value() != nil)
        #expect(received.value == executors.count)
    }
}
