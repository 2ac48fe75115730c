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
    /// is run or dropped, once (before, both walked the same handlers: a use-after-free). The
    /// release also leaves the attempt its hub, which the limit's decision reads: the hub it
    /// shares with its source, or, for a second limit on the same source, its own (before, the
    /// release freed the hub under the limit: a use-after-free that AddressSanitizer caught in
    /// about one run in twenty at 20,000 rounds, on either path). A future's limit keeps its
    /// result, so there every handler runs.
    @Suite struct TimeoutReleaseRaceStressTests {
        static let handlers = 64

        /// One round: a clock whose limits are pending, and what the handlers ran and kept alive.
        protocol TimeoutRound: Sendable {
            var clock: VirtualTimeExecutor { get }
            var ran: Counter { get }
            var live: LiveCount { get }
        }

        /// Limits that an attempt's release may race: one decides through the hub it shares
        /// with its source, and those after the first through hubs of their own.
        static let limits = 8

        /// Handlers on each limit when there are several.
        static let handlersPerLimit = 8

        /// An unfilled input, its timeout on a virtual clock, and handlers on the result, whose
        /// future is dropped: only the input's link and the pending limit hold the result.
        final class FutureRound: TimeoutRound {
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
        final class AttemptRound: TimeoutRound {
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
            let outcomes = Self.race(FutureRound.init) { round in blackHole(round.input.withLock { $0.take() }) }
            print("future timeout against the release of its input: \(outcomes)")
            #expect(outcomes.keys.sorted() == ["ran \(Self.handlers), live 0"])
        }

        @Test func anAttemptTimeoutFiringWhileItsSourceIsReleasedRunsEachHandlerOnce() {
            let outcomes = Self.race(AttemptRound.init) { round in blackHole(round.input.withLock { $0.take() }) }
            print("attempt timeout against the release of its source: \(outcomes)")
            let expected = ["ran 0, live 0", "ran \(Self.handlers), live 0"]
            #expect(Set(outcomes.keys).isSubset(of: expected), "each round runs all handlers or drops all, once")
        }

        /// Several attempt timeouts on one unfilled source, each with its handlers.
        final class SeveralLimitsRound: TimeoutRound {
            let input = Mutex<DeferredAttempt<Int, TestError>?>(DeferredAttempt<Int, TestError>())
            let clock = VirtualTimeExecutor()
            let ran = Counter()
            let live = LiveCount()

            init() {
                let source = input.withLock { $0! }.attempt
                for _ in 0..<TimeoutReleaseRaceStressTests.limits {
                    let limited = source.timeout(after: .seconds(1), on: clock, failingWith: .timedOut)
                    for _ in 0..<TimeoutReleaseRaceStressTests.handlersPerLimit {
                        let tracked = LifetimeTracked(live)
                        limited.upon(.immediate) { [ran] _ in
                            ran.increment()
                            blackHole(tracked)
                        }
                    }
                }
            }
        }

        @Test func severalAttemptTimeoutsFiringWhileTheirSourceIsReleasedRunEachHandlerOnce() {
            let outcomes = Self.race(SeveralLimitsRound.init) { round in blackHole(round.input.withLock { $0.take() }) }
            print("\(Self.limits) attempt timeouts against the release of their source: \(outcomes)")
            let expected = (0...Self.limits).map { "ran \($0 * Self.handlersPerLimit), live 0" }
            #expect(Set(outcomes.keys).isSubset(of: expected), "each limit runs all its handlers or drops all, once")
        }

        /// Races `release` against the round's clock passing the limit, in batches of 500
        /// rounds, and counts the outcomes: how many handlers ran, and how many captures live.
        static func race<Round: TimeoutRound>(
            _ make: () -> Round, release: @escaping @Sendable (Round) -> Void
        ) -> [String: Int] {
            var outcomes: [String: Int] = [:]
            for _ in 0..<max(1, Stress.rounds / 2_500) {
                let rounds = (0..<500).map { _ in make() }
                RaceHarness.run(rounds, left: release, right: { round in round.clock.advance(by: .seconds(1)) })
                for round in rounds {
                    outcomes["ran \(round.ran.value), live \(round.live.value)", default: 0] += 1
                }
            }
            return outcomes
        }
    }
}
