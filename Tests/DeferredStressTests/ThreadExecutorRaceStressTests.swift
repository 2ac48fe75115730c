import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

extension StressSuites {
    /// A ThreadExecutor's promise under races with its shutdown: a body it accepted runs exactly
    /// once, one it refused never runs, and either way the body is released and the thread ends.
    @Suite struct ThreadExecutorRaceStressTests {
        /// Rounds of each race: each round starts a thread.
        static var rounds: Int { TestSize.current.threadRaceRounds }

        /// One round: an executor, the bodies submitted to it, and what became of them.
        final class Round: Sendable {
            let executor = ThreadExecutor(name: "race")
            let live = LiveCount()
            let ran = Counter()
            let delayedRan = Counter()
            /// Whether the executor was still open once `submit` returned: then it accepted.
            let openAfterSubmit = Atomic<Bool>(false)
        }

        @Test func aBodySubmittedAsTheExecutorShutsDownRunsOnceOrIsReleasedUnrun() async {
            await RaceHarness.expectInterleavings(
                "submit against shutdown", rounds: Self.rounds, expected: ["ran", "refused"]
            ) { size in
                var counts: [String: Int] = [:]
                // A hundred threads at a time, not a batch's worth.
                for start in stride(from: 0, to: size, by: 100) {
                    let rounds = (start..<min(size, start + 100)).map { _ in Round() }
                    RaceHarness.run(
                        rounds,
                        left: { round in
                            let tracked = LifetimeTracked(round.live)
                            round.executor.submit {
                                _ = tracked
                                round.ran.increment()
                            }
                            round.executor.submit(after: .zero) {
                                _ = tracked
                                round.delayedRan.increment()
                            }
                            round.openAfterSubmit.store(!round.executor.isShutDown, ordering: .relaxed)
                        },
                        right: { round in round.executor.shutdown() }
                    )
                    for round in rounds {
                        let exited = round.executor.shutdown().value(within: 30) != nil
                        #expect(exited, "the thread exited")
                        #expect(round.ran.value <= 1 && round.delayedRan.value <= 1)
                        #expect(round.live.value == 0, "every body was released")
                        if round.openAfterSubmit.load(ordering: .relaxed) {
                            #expect(round.ran.value == 1, "a body accepted before the shutdown ran")
                        }
                        counts[round.ran.value == 1 ? "ran" : "refused", default: 0] += 1
                    }
                }
                return counts
            }
        }
    }
}
