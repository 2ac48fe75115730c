import Deferred
import Dispatch
import Foundation
import TestSupport
import Testing

/// Guarantee 3: handlers added on one thread before the fill start in the order they were
/// added when their executor is serial.
@Suite struct OrderingTests {
    @Test func handlersOnASerialQueueStartInTheOrderTheyWereAdded() {
        let queue = DispatchQueue(label: "ordering")
        let deferred = Deferred<Int>()
        let recorder = OrderRecorder(count: 1_000)
        for index in 0..<1_000 {
            deferred.upon(queue) { _ in recorder.record(index) }
        }
        deferred.fill(with: 1)
        queue.flush()
        #expect(recorder.order == Array(0..<1_000))
    }

    /// A hundred handlers fill the inline slot and chunks of 2, 4, 8, 16, 32 and 32 slots.
    @Test(arguments: ExecutorKind.allCases.filter(\.isSerial))
    func handlersOnAnySerialExecutorStartInTheOrderTheyWereAdded(_ kind: ExecutorKind) {
        let under = kind.make()
        let deferred = Deferred<Int>()
        let recorder = OrderRecorder(count: 100)
        for index in 0..<100 {
            deferred.upon(under.executor) { _ in recorder.record(index) }
        }
        deferred.fill(with: 1)
        #expect(under.settle { recorder.order.count == 100 })
        #expect(recorder.order == Array(0..<100))
    }

    @Test func handlersAddedAfterTheFillKeepTheirOrderToo() {
        let queue = DispatchQueue(label: "ordering-after")
        let deferred = Deferred(filledWith: 1)
        let recorder = OrderRecorder(count: 100)
        for index in 0..<100 {
            deferred.upon(queue) { _ in recorder.record(index) }
        }
        queue.flush()
        #expect(recorder.order == Array(0..<100))
    }

    @Test func everyHandlerOfAFutureRunsBeforeTheHandlersOfFuturesItCompletes() {
        let source = Deferred<Int>()
        let recorder = OrderRecorder(count: 3)
        let mapped = source.map(upon: .immediate) { $0 }
        mapped.upon(.immediate) { _ in recorder.record(2) }
        source.upon(.immediate) { _ in recorder.record(0) }
        source.upon(.immediate) { _ in recorder.record(1) }
        source.fill(with: 1)
        #expect(recorder.order == [0, 1, 2])
    }
}
