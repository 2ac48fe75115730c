import Deferred
import Dispatch
import TestSupport
import Testing

@Suite struct FutureMapTests {
    @Test func mapTransformsTheValueOnceItArrives() {
        let deferred = Deferred<Int>()
        let mapped = deferred.map(upon: .immediate) { "#\($0)" }
        #expect(mapped.peek() == nil)
        deferred.fill(with: 4)
        #expect(mapped.peek() == "#4")
    }

    @Test func mapOfAFilledFutureIsFilledAtOnceOnTheImmediateExecutor() {
        #expect(Future(filledWith: 2).map(upon: .immediate) { $0 * 3 }.peek() == 6)
    }

    @Test func mapRunsTheTransformExactlyOnceWhateverTheReaders() {
        let deferred = Deferred<Int>()
        let calls = Counter()
        let mapped = deferred.map(upon: .immediate) { value -> Int in
            calls.increment()
            return value + 1
        }
        mapped.upon(.immediate) { _ in }
        mapped.upon(.immediate) { _ in }
        deferred.fill(with: 1)
        #expect(mapped.peek() == 2)
        #expect(mapped.peek() == 2)
        #expect(calls.value == 1)
    }

    @Test func mapRunsTheTransformOnTheExecutorItNames() {
        let executor = CountingExecutor()
        let key = DispatchSpecificKey<Bool>()
        executor.queue.setSpecific(key: key, value: true)
        let deferred = Deferred<Int>()
        let mapped = deferred.map(upon: executor) { _ in DispatchQueue.getSpecific(key: key) == true }
        deferred.fill(with: 1)
        #expect(mapped.value() == true)
        #expect(executor.submitted.value == 1)
        let afterFill = deferred.map(upon: executor) { _ in DispatchQueue.getSpecific(key: key) == true }
        #expect(afterFill.value() == true)
        #expect(executor.submitted.value == 2)
    }

    @Test func mapOfACustomFutureWorks() {
        let base = Deferred<Int>()
        let mapped = CountingFuture(base: base).map(upon: .immediate) { $0 * 10 }
        base.fill(with: 5)
        #expect(mapped.peek() == 50)
    }

    @Test func mapOfTheNeverFutureIsNeverFilled() {
        #expect(Future<Int>.never.map(upon: .immediate) { $0 }.peek() == nil)
    }

    @Test func theTransformIsReleasedOnceItRanThoughTheResultLivesOn() {
        let live = LiveCount()
        let deferred = Deferred<Int>()
        let mapped: Future<Int>
        do {
            let tracked = LifetimeTracked(live)
            mapped = deferred.map(upon: .immediate) { value in
                _ = tracked
                return value
            }
        }
        #expect(live.value == 1)
        deferred.fill(with: 1)
        #expect(mapped.peek() == 1)
        #expect(live.value == 0)
    }
}
