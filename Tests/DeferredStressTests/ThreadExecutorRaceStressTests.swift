import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

extension StressSuites {
    /// A ThreadExecutor's and a LoopExecutor's promise under races with their shutdown: a body
    /// accepted runs exactly once, one refused never runs, and either way the body is released
    /// and the thread ends; and a LoopExecutor's under races with its going idle: a body
    /// submitted as the thread finishes its last work and waits runs.
    @Suite struct ThreadExecutorRaceStressTests {
        /// Rounds of each race: each round starts a thread.
        static var rounds: Int { TestSize.current.threadRaceRounds }

        /// One round: an executor, the bodies submitted to it, and what became of them.
        final class Round: Sendable {
            let executor: any OwnedThreadExecutor
            let live = LiveCount()
            let ran = Counter()
            let delayedRan = Counter()
            /// Whether the executor was still open once `submit` returned: then it accepted.
            let openAfterSubmit = Atomic<Bool>(false)

            init(_ kind: OwnedThreadKind) {
                executor = kind.make(name: "race")
            }
        }

        @Test(arguments: OwnedThreadKind.allCases)
        func aBodySubmittedAsTheExecutorShutsDownRunsOnceOrIsReleasedUnrun(_ kind: OwnedThreadKind) async {
            await RaceHarness.expectInterleavings(
                "submit against \(kind) shutdown", rounds: Self.rounds, expected: ["ran", "refused"]
            ) { size in
                var counts: [String: Int] = [:]
                // A hundred threads at a time, not a batch's worth.
                for start in stride(from: 0, to: size, by: 100) {
                    let rounds = (start..<min(size, start + 100)).map { _ in Round(kind) }
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

        /// A body submitted from another thread as a loop finishes its last body and goes to wait
        /// runs: the push that finds the stack empty wakes the thread, whichever comes first.
        @Test func aBodySubmittedAsALoopGoesIdleRuns() async {
            let loop = LoopExecutor(name: "idle race")
            defer { loop.shutdown() }
            await RaceHarness.expectInterleavings(
                "submit against a loop going idle", rounds: Self.rounds * 10,
                expected: ["while the last body ran", "after it"]
            ) { size in
                var counts: [String: Int] = [:]
                for _ in 0..<size {
                    let lastEnded = Atomic<Bool>(false)
                    let ran = Deferred<Void>()
                    let started = Deferred<Void>()
                    loop.submit {
                        started.fill()
                        lastEnded.store(true, ordering: .releasing)
                    }
                    _ = started.value(within: 30)
                    let during = !lastEnded.load(ordering: .acquiring)
                    loop.submit { ran.fill() }
                    #expect(ran.value(within: 30) != nil, "the body submitted as the loop went idle ran")
                    counts[during ? "while the last body ran" : "after it", default: 0] += 1
                }
                return counts
            }
        }
    }
}
