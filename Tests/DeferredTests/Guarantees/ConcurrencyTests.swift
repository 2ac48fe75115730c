import Deferred
import Dispatch
import Foundation
import TestSupport
import Testing

/// Guarantee 6: every type is usable from any thread, and the compiler knows it.
@Suite struct ConcurrencyTests {
    func requireSendable<T: Sendable>(_ value: T) {}

    @Test func theFutureTypesAreSendable() {
        requireSendable(Deferred<Int>())
        requireSendable(Future<String>.never)
        requireSendable(Deferred<Int>().ignored())
        requireSendable(Deferred<Int>().lazy.map { $0 })
        requireSendable(ImmediateExecutor())
        requireSendable(DispatchQueue.main as any Executor)
    }

    @Test func manyThreadsMayUseOneFutureAtOnce() {
        let deferred = Deferred<Int>()
        let ran = Counter()
        let wins = Counter()
        DispatchQueue.concurrentPerform(iterations: 64) { index in
            deferred.upon(.immediate) { _ in ran.increment() }
            _ = deferred.peek()
            _ = deferred.isFilled
            if index % 8 == 0, deferred.fill(with: index) {
                wins.increment()
            }
            _ = deferred.map(upon: .immediate) { $0 }.and(Future(filledWith: index)).peek()
        }
        #expect(wins.value == 1)
        #expect(ran.value == 64)
        #expect(deferred.peek().map { $0 % 8 } == 0)
    }

    @Test func futuresCrossIntoTasks() async {
        let deferred = Deferred<Int>()
        let future = Future(deferred)
        let reader = Task.detached { await future.value }
        deferred.fill(with: 5)
        #expect(await reader.value == 5)
    }
}
