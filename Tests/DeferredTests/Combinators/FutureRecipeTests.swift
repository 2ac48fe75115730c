import Deferred
import DeferredExecutors
import Dispatch
import TestSupport
import Testing

/// The operations a migrating user reaches for, on futures.
///
/// Each test checks what the operation adds beyond the recipe it is made of. Their guarantees (exactly once, release, stack safety) are in the suites over
/// ``FutureKind``.
@Suite struct FutureRecipeTests {
    @Test func filterPassesAnAcceptedValueAndFailsARejectedOneWithTheCallersError() {
        let accepted = Future(filledWith: 20).filter(upon: .immediate, failingWith: TestError.failed(0)) { $0 >= 18 }
        let rejected = Future(filledWith: 12).filter(upon: .immediate, failingWith: TestError.failed(0)) { $0 >= 18 }
        #expect(accepted.peek() == .success(20))
        #expect(rejected.peek() == .failure(.failed(0)))
    }

    @Test func reduceCombinesInTheCollectionsOrderWhateverTheOrderOfFilling() {
        let parts = (0..<3).map { _ in Deferred<String>() }
        let joined = parts.reduce("", upon: .immediate) { $0 + $1 }
        parts[2].fill(with: "c")
        parts[0].fill(with: "a")
        #expect(joined.peek() == nil, "waits for every future")
        parts[1].fill(with: "b")
        #expect(joined.peek() == "abc")
        #expect([Future<Int>]().reduce(7, upon: .immediate, +).peek() == 7, "an empty collection gives the start")
    }

    @Test func firstFindsTheFirstAcceptedValueInTheCollectionsOrder() {
        let slow = Deferred<Int>()
        let fast = Deferred<Int>()
        let found = [Future(slow), Future(fast)].first(upon: .immediate) { $0 > 10 }
        fast.fill(with: 20)
        #expect(found.peek() == nil, "an earlier future may still match")
        slow.fill(with: 30)
        #expect(found.peek() == .some(30))
        #expect([Future(filledWith: 1)].first(upon: .immediate) { $0 > 10 }.peek() == .some(nil))
    }

    @Test func allFilledWithATransformStartsTheWorkNowAndKeepsTheOrder() {
        let started = Counter()
        let pending = (0..<3).map { _ in Deferred<Int>() }
        let all = [2, 0, 1].allFilled { index -> Deferred<Int> in
            started.increment()
            return pending[index]
        }
        #expect(started.value == 3)
        for (index, deferred) in pending.enumerated() {
            deferred.fill(with: index * 10)
        }
        #expect(all.peek() == [20, 0, 10])
    }

    @Test func aProducerRunsAtOnceAndItsFirstFillCounts() {
        let ran = Counter()
        let later = Deferred<Deferred<Int>>()
        let future = Future<Int> { deferred in
            ran.increment()
            later.fill(with: deferred)
        }
        #expect(ran.value == 1, "the body ran before the initializer returned")
        #expect(future.peek() == nil)
        let deferred = later.peek()!
        #expect(deferred.fill(with: 1) == true)
        #expect(deferred.fill(with: 2) == false)
        #expect(future.peek() == 1)
    }

    @Test func aDelayedValueArrivesOnlyOnceTheDelayHasPassed() {
        let clock = VirtualTimeExecutor()
        let later = Future(filledWith: "tick", after: .seconds(2), upon: clock)
        clock.advance(by: .seconds(1))
        #expect(later.peek() == nil)
        clock.advance(by: .seconds(1))
        #expect(later.peek() == "tick")
    }

    @Test func aDeferredOfAResultSucceedsOrFailsOnce() {
        let login = Deferred<Result<Int, TestError>>()
        #expect(login.succeed(with: 1) == true)
        #expect(login.fail(with: .failed(2)) == false)
        #expect(login.peek() == .success(1))
        let failed = Deferred<Result<Int, TestError>>()
        #expect(failed.fail(with: .failed(2)) == true)
        #expect(Attempt(failed).peek() == .failure(.failed(2)))
    }
}
