import Deferred
import Dispatch
import TestSupport
import Testing

@Suite struct FutureTests {
    @Test func aFutureIsAReadOnlyViewOfItsDeferred() {
        let deferred = Deferred<Int>()
        let future = Future(deferred)
        #expect(future.peek() == nil)
        #expect(future.isFilled == false)
        deferred.fill(with: 6)
        #expect(future.peek() == 6)
        #expect(future.isFilled == true)
        #expect(future.wait(until: .now()) == 6)
    }

    @Test func aFutureCreatedWithAValueIsFilled() {
        let future = Future(filledWith: "ready")
        #expect(future.peek() == "ready")
        let received = Deferred<String>()
        future.upon(.immediate) { received.fill(with: $0) }
        #expect(received.peek() == "ready")
        #expect(future.wait(until: .now() - 1) == "ready")
    }

    @Test func theNeverFutureIsNeverFilled() {
        let never = Future<Int>.never
        #expect(never.peek() == nil)
        #expect(never.isFilled == false)
        #expect(never.wait(until: .now() + 0.01) == nil)
        let ran = Counter()
        never.upon(.immediate) { _ in ran.increment() }
        #expect(ran.value == 0)
    }

    @Test func theNeverFutureReleasesItsHandlersAtOnce() {
        let live = LiveCount()
        do {
            let tracked = LifetimeTracked(live)
            Future<Int>.never.upon(.immediate) { _ in _ = tracked }
        }
        #expect(live.value == 0)
    }

    @Test func anyFutureCanBeErased() {
        let base = Deferred<Int>()
        let custom = CountingFuture(base: base)
        let erased = Future(custom)
        let viaMethod = custom.eraseToFuture()
        let received = Deferred<Int>()
        erased.upon(.immediate) { received.fill(with: $0) }
        #expect(custom.handlers.value == 1, "the erased future forwards to the custom one")
        #expect(erased.peek() == nil)
        base.fill(with: 12)
        #expect(received.peek() == 12)
        #expect(erased.peek() == 12)
        #expect(viaMethod.peek() == 12)
        #expect(erased.wait(until: .now()) == 12)
    }

    @Test func erasingAFutureOrDeferredKeepsItsBehaviour() {
        let deferred = Deferred<Int>()
        let twice = Future(Future(deferred))
        let erasedDeferred = deferred.eraseToFuture()
        deferred.fill(with: 1)
        #expect(twice.peek() == 1)
        #expect(erasedDeferred.peek() == 1)
        #expect(Future(Future(filledWith: 2)).peek() == 2)
        #expect(Future(Future<Int>.never).peek() == nil)
    }

    @Test func asyncRunsTheWorkOnTheExecutorAndFillsWithItsResult() {
        let executor = CountingExecutor()
        let key = DispatchSpecificKey<Bool>()
        executor.queue.setSpecific(key: key, value: true)
        let future = Future<Bool>(upon: executor) { DispatchQueue.getSpecific(key: key) == true }
        #expect(future.value() == true)
        #expect(executor.submitted.value == 1)
    }

    @Test func asyncDefaultsToABackgroundQueue() {
        let future = Future(upon: DispatchQueue.global()) { 6 * 7 }
        #expect(future.value() == 42)
    }

    @Test func asyncOnTheImmediateExecutorIsFilledAtOnce() {
        let future = Future(upon: .immediate) { "now" }
        #expect(future.peek() == "now")
    }
}
