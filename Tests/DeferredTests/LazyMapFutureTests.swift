import Deferred
import Dispatch
import TestSupport
import Testing

@Suite struct LazyMapFutureTests {
    @Test func everyTransformsTheValueOnEachRead() {
        let deferred = Deferred<Int>()
        let calls = Counter()
        let doubled = deferred.every { value in
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

    @Test func everyRunsTheTransformForEachHandlerOnItsExecutor() {
        let deferred = Deferred<Int>()
        let queue = DispatchQueue(label: "every")
        let key = DispatchSpecificKey<Bool>()
        queue.setSpecific(key: key, value: true)
        let onQueue = deferred.every { _ in DispatchQueue.getSpecific(key: key) == true }
        let first = Deferred<Bool>()
        let second = Deferred<Bool>()
        onQueue.upon(queue) { first.fill(with: $0) }
        onQueue.upon(queue) { second.fill(with: $0) }
        deferred.fill(with: 1)
        #expect(first.value() == true)
        #expect(second.value() == true)
    }

    @Test func everyOverEveryComposes() {
        let deferred = Deferred<Int>()
        let described = deferred.every { $0 + 1 }.every { "value \($0)" }
        deferred.fill(with: 1)
        #expect(described.peek() == "value 2")
        #expect(described.eraseToFuture().peek() == "value 2")
    }

    @Test func everyOnAnUnfilledFutureWaitsUntilTheDeadline() {
        #expect(Deferred<Int>().every { $0 }.wait(until: .now() + 0.01) == nil)
    }
}
