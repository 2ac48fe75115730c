import Deferred
import Dispatch
import TestSupport
import Testing

@Suite struct IgnoringFutureTests {
    @Test func anIgnoringFutureIsFilledWhenItsBaseIs() {
        let deferred = Deferred<Int>()
        let ignored = deferred.ignored()
        #expect(ignored.peek() == nil)
        #expect(ignored.isFilled == false)
        let ran = Counter()
        ignored.upon(.immediate) { ran.increment() }
        deferred.fill(with: 1)
        #expect(ran.value == 1)
        #expect(ignored.peek() != nil)
        #expect(ignored.isFilled == true)
        #expect(ignored.wait(until: .now()) != nil)
    }

    @Test func anIgnoringFutureWaitsForItsBase() {
        let ignored = IgnoringFuture(Deferred<Int>())
        #expect(ignored.wait(until: .now() + 0.01) == nil)
        #expect(IgnoringFuture(Future(filledWith: 1)).wait(until: .now() - 1) != nil)
    }

    @Test func ignoringTwiceGivesTheSameView() {
        let deferred = Deferred<String>()
        let once: IgnoringFuture<Deferred<String>> = deferred.ignored()
        let twice: IgnoringFuture<Deferred<String>> = once.ignored()
        deferred.fill(with: "done")
        #expect(twice.isFilled == true)
        #expect(twice.base.peek() == "done")
    }

    @Test func anIgnoringFutureCanBeErased() {
        let deferred = Deferred<Int>()
        let done: Future<Void> = deferred.ignored().eraseToFuture()
        #expect(done.isFilled == false)
        deferred.fill(with: 1)
        #expect(done.isFilled == true)
    }
}
