import Deferred
import Dispatch
import TestSupport
import Testing

@Suite struct FutureCollectionsTests {
    @Test func allFilledKeepsTheOrderOfTheCollectionWhateverTheFillOrder() {
        let parts = (0..<50).map { _ in Deferred<Int>() }
        let all = parts.allFilled()
        for index in [3, 49, 0, 17] + Array(0..<50) {
            #expect(all.peek() == nil || index == 49)
            parts[index].fill(with: index * 10)
        }
        #expect(all.peek() == (0..<50).map { $0 * 10 })
    }

    @Test func allFilledOfNothingIsFilledWithAnEmptyArray() {
        #expect([Future<Int>]().allFilled().peek() == [])
    }

    @Test func allFilledAcceptsTheSameFutureMoreThanOnce() {
        let deferred = Deferred<Int>()
        let all = [deferred, deferred, deferred].allFilled()
        deferred.fill(with: 7)
        #expect(all.peek() == [7, 7, 7])
    }

    @Test func allFilledOfFilledAndCustomFutures() {
        let pending = Deferred<Int>()
        let futures = [
            Future(filledWith: 1), Future(CountingFuture(base: pending)), pending.lazy.map { $0 + 1 }.eraseToFuture(),
        ]
        let all = futures.allFilled()
        #expect(all.peek() == nil)
        pending.fill(with: 2)
        #expect(all.peek() == [1, 2, 3])
    }

    @Test func allFilledCollectsValuesFilledOnManyThreads() {
        let parts = (0..<1_000).map { _ in Deferred<Int>() }
        let all = parts.allFilled()
        DispatchQueue.concurrentPerform(iterations: parts.count) { parts[$0].fill(with: $0) }
        #expect(all.value() == Array(0..<1_000))
    }

    @Test func firstFilledTakesTheFirstValueAndIgnoresTheRest() {
        let parts = (0..<3).map { _ in Deferred<String>() }
        let first = parts.firstFilled()
        #expect(first.peek() == nil)
        parts[1].fill(with: "one")
        parts[0].fill(with: "zero")
        parts[2].fill(with: "two")
        #expect(first.peek() == "one")
    }

    @Test func firstFilledOfAnAlreadyFilledFutureIsFilledAtOnce() {
        let first = [Future<Int>.never, Future(filledWith: 3), Future(filledWith: 4)].firstFilled()
        #expect(first.peek() == 3)
    }

    @Test func firstFilledOfNothingIsNeverFilled() {
        #expect([Future<Int>]().firstFilled().wait(until: .now() + 0.01) == nil)
    }

    @Test func firstFilledPrefersASourceOverAFutureItCompletes() {
        // The source is filled first; its mapped future is filled as a consequence.
        let source = Deferred<Int>()
        let first = [source.map(upon: .immediate) { $0 * 100 }, Future(source)].firstFilled()
        source.fill(with: 1)
        #expect(first.peek() == 1)
    }

    @Test func firstFilledOfCustomFutures() {
        let base = Deferred<Int>()
        let first = [CountingFuture(base: base), CountingFuture(base: Deferred<Int>())].firstFilled()
        base.fill(with: 5)
        #expect(first.peek() == 5)
    }
}
