import Deferred
import Dispatch
import TestSupport
import Testing

@Suite struct LazyMapFutureTests {
    @Test func aLazyMapTransformsTheValueOnEachRead() {
        let deferred = Deferred<Int>()
        let calls = Counter()
        let doubled = deferred.lazy.map { value in
            calls.increment()
            return value * 2
        }
        #expect(doubled.peek() == nil)
        #expect(calls.value == 0, "nothing runs before the value exists")
        deferred.fill(with: 21)
        #expect(doubled.peek() == 42)
        #expect(doubled.peek() == 42)
        #expect(doubled.wait(until: .now()) == 42)
        #expect(calls.value == 3, "every read runs the transform again")
    }

    @Test func aLazyMapRunsTheTransformForEachHandlerOnItsExecutor() {
        let deferred = Deferred<Int>()
        let queue = DispatchQueue(label: "every")
        let key = DispatchSpecificKey<Bool>()
        queue.setSpecific(key: key, value: true)
        let onQueue = deferred.lazy.map { _ in DispatchQueue.getSpecific(key: key) == true }
        let first = Deferred<Bool>()
        let second = Deferred<Bool>()
        onQueue.upon(queue) { first.fill(with: $0) }
        onQueue.upon(queue) { second.fill(with: $0) }
        deferred.fill(with: 1)
        #expect(first.value() == true)
        #expect(second.value() == true)
    }

    @Test func aLazyMapOverALazyMapComposes() {
        let deferred = Deferred<Int>()
        let described = deferred.lazy.map { $0 + 1 }.lazy.map { "value \($0)" }
        deferred.fill(with: 1)
        #expect(described.peek() == "value 2")
        #expect(described.eraseToFuture().peek() == "value 2")
    }

    @Test func aLazyMapOverALazyMapIsOneViewOfTheFirstBase() {
        let deferred = Deferred<Int>()
        let calls = Counter()
        let chained: LazyMapFuture<Deferred<Int>, String> = deferred.lazy.map { $0 * 2 }.lazy.map { $0 + 1 }.lazy.map {
            calls.increment()
            return "\($0)"
        }
        deferred.fill(with: 3)
        #expect(chained.peek() == "7", "the steps run first to last")
        #expect(calls.value == 1)
    }

    @Test func erasingEveryOverAnErasedEveryKeepsTheOrderOfSteps() {
        let deferred = Deferred<Int>()
        let once = Future(deferred.lazy.map { $0 * 2 }.lazy.map { $0 - 1 })
        let twice = once.lazy.map { $0 * 10 }.lazy.map { $0 + 4 }.eraseToFuture()
        let joined = [twice, once].allFilled()
        let mapped = twice.map(upon: .immediate) { -$0 }
        #expect(twice.peek() == nil)
        deferred.fill(with: 3)
        #expect(once.peek() == 5)
        #expect(twice.peek() == 54)
        #expect(joined.peek() == [54, 5])
        #expect(mapped.peek() == -54)
    }

    @Test func combinatorsOverViewsRunInTheFillingDrain() {
        // A view links to the storage underneath, so a join over a view fills in the same drain
        // as a join over the storage itself: before the filling call returns, in order.
        let deferred = Deferred<Int>()
        let order = OrderRecorder(count: 3)
        [deferred.lazy.map { $0 }].allFilled().upon(.immediate) { _ in order.record(0) }
        [deferred.ignored()].allFilled().upon(.immediate) { _ in order.record(1) }
        [Future(deferred)].allFilled().upon(.immediate) { _ in order.record(2) }
        deferred.fill(with: 1)
        #expect(order.order == [0, 1, 2])
    }

    @Test func aLazyMapOfAnUnfilledFutureWaitsUntilTheDeadline() {
        #expect(Deferred<Int>().lazy.map { $0 }.wait(until: .now() + 0.01) == nil)
    }
}
