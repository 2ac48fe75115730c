import Deferred
import DeferredExecutors
import Synchronization
import TestSupport
import Testing

extension StressSuites {
    /// A time limit firing while the last owner of its unfilled input releases it.
    ///
    /// The release walks the chain below the input while the limit decides the timeout on
    /// another thread. An attempt's limit holds the limited attempt weakly, so the release may
    /// find it unreferenced and drop its handlers while the limit runs them: the storage's
    /// release and its fill now take the handlers with one atomic step each, so each handler
    /// is run or dropped, once (before, both walked the same handlers: a use-after-free). A
    /// future's limit keeps its result, so there every handler runs.
    @Suite struct TimeoutReleaseRaceStressTests {
        static let handlers = 64

        /// An unfilled input, its timeout on a virtual clock, and handlers on the result, whose
        /// future is dropped: only the input's link and the pending limit hold the result.
        final class FutureRound: Sendable {
            let input = Mutex<Deferred<Int>?>(Deferred<Int>())
            let clock = VirtualTimeExecutor()
            let ran = Counter()
            let live = LiveCount()

            init() {
                let result = input.withLock { $0! }.timeout(after: .seconds(1), on: clock, substituting: -1)
                for _ in 0..<TimeoutReleaseRaceStressTests.handlers {
                    let tracked = LifetimeTracked(live)
                    result.upon(.immediate) { [ran] _ in
                        ran.increment()
                        blackHole(tracked)
                    }
                }
            }
        }

        /// The same for an attempt's timeout.
        final class AttemptRound: Sendable {
            let input = Mutex<DeferredAttempt<Int, TestError>?>(DeferredAttempt<Int, TestError>())
            let clock = VirtualTimeExecutor()
            let ran = Counter()
            let live = LiveCount()

            init() {
                let limited = input.withLock { $0! }.attempt.timeout(
                    after: .seconds(1), on: clock, failingWith: .timedOut)
                for _ in 0..<TimeoutReleaseRaceStressTests.handlers {
                    let tracked = LifetimeTracked(live)
                    limited.upon(.immediate) { [ran] _ in
                        ran.increment()
                        blackHole(tracked)
                    }
                }
            }
        }

        @Test func aFutureTimeoutFiringWhileItsInputIsReleasedRunsEachHandlerOnce() {
            var outcomes: [String: Int] = [:]
            for _ in 0..<max(1, Stress.rounds / 2_500) {
                let rounds = (0..<500).map { _ in FutureRound() }
                RaceHarness.run(
                    rounds,
                    left: { round in blackHole(round.input.withLock { $0.take() }) },
                    right: { round in round.clock.advance(by: .seconds(1)) }
                )
                for round in rounds {
                    outcomes["ran \(round.ran.value), live \(round.live.value)", default: 0] += 1
                }
            }
            print("future timeout against the release of its input: \(outcomes)")
            #expect(outcomes.keys.sorted() == ["ran \(Self.handlers), live 0"])
        }

        @Test func anAttemptTimeoutFiringWhileItsSourceIsReleasedRunsEachHandlerOnce() {
            var outcomes: [String: Int] = [:]
            for _ in 0..<max(1, Stress.rounds / 2_500) {
                let rounds = (0..<500).map { _ in AttemptRound() }
                RaceHarness.run(
                    rounds,
                    left: { round in blackHole(round.input.withLock { $0.take() }) },
                    right: { round in round.clock.advance(by: .seconds(1)) }
                )
                for round in rounds {
                    outcomes["ran \(round.ran.value), live \(round.live.value)", default: 0] += 1
                }
            }
            print("attempt timeout against the release of its source: \(outcomes)")
            let expected = ["ran 0, live 0", "ran \(Self.handlers), live 0"]
            #expect(Set(outcomes.keys).isSubset(of: expected), "each round runs all handlers or drops all, once")
        }
    }
}
