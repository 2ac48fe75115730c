import Deferred
import Dispatch
import TestSupport
import Testing

@Suite struct FutureAndThenTests {
    @Test func andThenFollowsTheFutureThatStartReturns() {
        let first = Deferred<Int>()
        let second = Deferred<String>()
        let chained = first.andThen(upon: .immediate) { value -> Deferred<String> in
            #expect(value == 1)
            return second
        }
        first.fill(with: 1)
        #expect(chained.peek() == nil)
        second.fill(with: "done")
        #expect(chained.peek() == "done")
    }

    @Test func andThenOfAnAlreadyFilledStepIsFilledAtOnce() {
        let chained = Future(filledWith: 2).andThen(upon: .immediate) { Future(filledWith: $0 * 2) }
        #expect(chained.peek() == 4)
        let deferred = Deferred<Int>()
        let later = deferred.andThen(upon: .immediate) { Deferred(filledWith: $0 + 1) }
        deferred.fill(with: 1)
        #expect(later.peek() == 2)
    }

    @Test func andThenRunsStartOnceOnTheExecutorItNames() {
        let executor = CountingExecutor()
        let key = DispatchSpecificKey<Bool>()
        executor.queue.setSpecific(key: key, value: true)
        let deferred = Deferred<Int>()
        let chained = deferred.andThen(upon: executor) { _ in
            Future(filledWith: DispatchQueue.getSpecific(key: key) == true)
        }
        deferred.fill(with: 1)
        #expect(chained.value() == true)
        #expect(executor.submitted.value == 1)
    }

    @Test func andThenFollowsCustomAndErasedFutures() {
        let source = Deferred<Int>()
        let inner = Deferred<Int>()
        let viaCustom = source.andThen(upon: .immediate) { _ in CountingFuture(base: inner) }
        let viaErased = source.andThen(upon: .immediate) { _ in CountingFuture(base: inner).eraseToFuture() }
        let viaLazy = source.andThen(upon: .immediate) { _ in inner.lazy.map { $0 * 2 } }
        source.fill(with: 0)
        inner.fill(with: 8)
        #expect(viaCustom.peek() == 8)
        #expect(viaErased.peek() == 8)
        #expect(viaLazy.peek() == 16)
    }

    @Test func andThenOfTheNeverFutureIsNeverFilled() {
        let deferred = Deferred<Int>()
        let chained = deferred.andThen(upon: .immediate) { _ in Future<Int>.never }
        deferred.fill(with: 1)
        #expect(chained.peek() == nil)
    }

    @Test func theStartClosureIsReleasedOnceItRan() {
        let live = LiveCount()
        let deferred = Deferred<Int>()
        let chained: Future<Int>
        do {
            let tracked = LifetimeTracked(live)
            chained = deferred.andThen(upon: .immediate) { value in
                _ = tracked
                return Future(filledWith: value)
            }
        }
        #expect(live.value == 1)
        deferred.fill(with: 3)
        #expect(chained.peek() == 3)
        #expect(live.value == 0)
    }
}
