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

        /// An unfilled input, its timeout on a virtual clock, and handlers on the result, whose
        /// future is dropped: only the input's link and the pending limit hold the result.
        final class FutureRound: TimeoutRound {
            let input = Mutex<Deferred<Int>?>(Deferred<Int>())
            let clock = VirtualTimeExecutor()
            let ran = Counter()
            let live = LiveCount()

            init() {
                let result = input.withLock { $0! }.timeout(after: .seconds(1), upon: clock, substituting: -1)
                addHandlers(TimeoutReleaseRaceStressTests.handlers, to: result)
            }
        }

        /// The same for `limits` attempt timeouts on one source, which share the handlers.
        ///
        /// The first limit decides through the hub it shares with its source, those after it
        /// through hubs of their own.
        final class AttemptRound: TimeoutRound {
            let input = Mutex<DeferredAttempt<Int, TestError>?>(DeferredAttempt<Int, TestError>())
            let clock = VirtualTimeExecutor()
            let ran = Counter()
            let live = LiveCount()

            init(limits: Int) {
                let source = input.withLock { $0?.attempt }!
                for _ in 0..<limits {
                    let limited = source.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
                    addHandlers(TimeoutReleaseRaceStressTests.handlers / limits, to: limited)
                }
            }
        }

        @Test func aFutureTimeoutFiringWhileItsInputIsReleasedRunsEachHandlerOnce() {
            let outcomes = Self.race(FutureRound.init) { round in blackHole(round.input.withLock { $0.take() }) }
            progress("future timeout against the release of its input: \(outcomes)")
            #expect(outcomes.keys.sorted() == ["ran \(Self.handlers), live 0"])
        }

        @Test(arguments: [1, 8])
        func attemptTimeoutsFiringWhileTheirSourceIsReleasedRunEachHandlerOnce(limits: Int) {
            let outcomes = Self.race(
                { AttemptRound(limits: limits) }, release: { round in blackHole(round.input.withLock { $0.take() }) })
            progress("\(limits) attempt timeout(s) against the release of their source: \(outcomes)")
            let expected = (0...limits).map { "ran \($0 * Self.handlers / limits), live 0" }
            #expect(Set(outcomes.keys).isSubset(of: expected), "each limit runs all its handlers or drops all, once")
        }

        /// Races `release` against the round's clock passing the limit for the test size's rounds, in
        /// batches of 500, and counts the outcomes: how many handlers ran, and how many captures live.
        static func race<Round: TimeoutRound>(
            _ make: () -> Round, release: @escaping @Sendable (Round) -> Void
        ) -> [String: Int] {
            var outcomes: [String: Int] = [:]
            for _ in 0..<max(1, TestSize.current.raceRounds / 500) {
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

extension StressSuites.TimeoutReleaseRaceStressTests.TimeoutRound {
    /// Adds `count` inline handlers to `future`, each counting its run in ``ran`` and keeping a
    /// capture counted in ``live``.
    func addHandlers(_ count: Int, to future: some FutureProtocol) {
        for _ in 0..<count {
            let tracked = LifetimeTracked(live)
            future.upon(.immediate) { [ran] _ in
                ran.increment()
                blackHole(tracked)
            }
        }
    }
}
