import Deferred
import DeferredExecutors
import Synchronization
import TestSupport
import Testing

/// `SharedFutures`: one run per key while it is in flight, every caller a future of its value,
/// the key forgotten when it fills, and values kept only for as long as asked.
@Suite struct SharedFuturesTests {
    @Test func callersOfOneKeyShareOneRunAndTheKeyIsForgottenWhenItFills() {
        let runs = Mutex<[Deferred<Int>]>([])
        let start: (String) -> Deferred<Int> = { _ in
            let run = Deferred<Int>()
            runs.withLock { $0.append(run) }
            return run
        }
        let shared = SharedFutures<String, Int>()
        let futures = (0..<3).map { _ in shared.future(for: "a", start: start) }
        let other = shared.future(for: "b", start: start)
        #expect(runs.withLock { $0.count } == 2 && shared.count == 2)
        runs.withLock { $0[0] }.fill(with: 4)
        #expect(futures.allSatisfy { $0.peek() == 4 } && other.peek() == nil)
        #expect(!shared.contains("a") && shared.contains("b"))
        _ = shared.future(for: "a", start: start)
        #expect(runs.withLock { $0.count } == 3, "the next caller starts a new run")
    }

    @Test func anyKindOfFutureCanBeTheWork() {
        let shared = SharedFutures<Int, String>()
        #expect(shared.future(for: 1) { Future(filledWith: "\($0)") }.peek() == "1")
        #expect(
            shared.future(for: 2) { key in Future(filledWith: key).map(upon: .immediate) { "\($0 * 2)" } }.peek() == "4"
        )
        #expect(shared.future(for: 3) { key in Future(upon: .global()) { "\(key)" } }.value(within: 10) == "3")
        #expect(shared.count == 0)
    }

    @Test func aCallerWhoHasSeenTheValueFilledOnAnotherThreadStartsANewRun() {
        let shared = SharedFutures<Int, Int>()
        for round in 0..<500 {
            let value = shared.future(for: 0) { _ in Future(upon: .global()) { round } }.value(within: 10)
            #expect(
                value == round && !shared.contains(0), "round \(round): the key is forgotten before the value is seen")
        }
    }

    @Test func valuesAreKeptForTheirTimeAndCanBeForgotten() {
        let clock = VirtualTimeExecutor()
        let shared = SharedFutures<String, Int>(keepingValuesFor: .seconds(5), upon: clock)
        let starts = Counter()
        let start: (String) -> Future<Int> = { _ in Future(filledWith: starts.increment()) }  // 0, 1, 2…
        #expect(shared.future(for: "a", start: start).peek() == 0)
        #expect(shared.future(for: "a", start: start).peek() == 0, "kept")
        clock.advance(by: .seconds(5))
        #expect(shared.future(for: "a", start: start).peek() == 1, "forgotten when its time is up")
        shared.forget("a")
        #expect(shared.future(for: "a", start: start).peek() == 2, "forgotten when asked")
        clock.advance(by: .seconds(5))
        #expect(shared.count == 0)
    }

    @Test func forgettingARunInFlightLeavesItToItsCallers() {
        let first = Deferred<Int>()
        let shared = SharedFutures<String, Int>()
        let old = shared.future(for: "a") { _ in first }
        shared.forget("a")
        let second = Deferred<Int>()
        let new = shared.future(for: "a") { _ in second }
        first.fill(with: 1)
        #expect(old.peek() == 1 && new.peek() == nil && shared.contains("a"))
        second.fill(with: 2)
        #expect(new.peek() == 2 && shared.count == 0)
    }
}
