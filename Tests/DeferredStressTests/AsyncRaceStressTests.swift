import Deferred
import Foundation
import Synchronization
import TestSupport
import Testing

extension StressSuites {
    /// Guarantee 6 under real races: a task awaiting a future resumes exactly once, with the value
    /// or, for `get()`, with `CancellationError` — whichever of the fill and the cancellation
    /// came first.
    ///
    /// Each round starts its waiting task with `Task.immediate`, which runs the task on the calling
    /// thread until it first suspends, so the task reaches the future at a known moment of the race.
    @Suite struct AsyncRaceStressTests {
        /// How a round ended, as the waiting task reports it.
        enum Outcome: Hashable, Sendable, CustomStringConvertible {
            case valueWithoutSuspending(Int)
            case valueAfterSuspending(Int)
            case cancelled
            case failed

            var description: String {
                switch self {
                case .valueWithoutSuspending(let value): "\(value) without suspending"
                case .valueAfterSuspending(let value): "\(value) after suspending"
                case .cancelled: "cancelled"
                case .failed: "failed"
                }
            }
        }

        /// One future, and where its waiting task reports how it ended.
        final class Round: Sendable {
            let deferred = Deferred<Int>()
            let outcome = Deferred<Outcome>()
            /// An extra head start for the waiting side, which has a task to create before it
            /// reaches the future. The ranges were tuned so that both outcomes are common: an
            /// optimized build pauses far faster than it creates a task.
            #if DEBUG
                let headStart = Int.random(in: 0..<5_000)
            #else
                let headStart = Int.random(in: 0..<40_000)
            #endif
        }

        @Test(.timeLimit(.minutes(5)))
        func aTaskAwaitingTheValueWhileItIsFilledResumesOnceWithIt() async {
            await RaceHarness.expectInterleavings(
                "fill against await value",
                expected: ["\(Outcome.valueWithoutSuspending(1))", "\(Outcome.valueAfterSuspending(1))"]
            ) { size in
                let rounds = (0..<size).map { _ in Round() }
                RaceHarness.run(
                    rounds,
                    left: { round in
                        RaceHarness.pause(round.headStart)
                        round.deferred.fill(with: 1)
                    },
                    right: { round in
                        Task.immediate {
                            let before = currentThread()
                            let value = await round.deferred.value
                            let suspended = currentThread() !== before  // a resumed task runs on the task pool
                            round.outcome.mustFill(
                                with: suspended ? .valueAfterSuspending(value) : .valueWithoutSuspending(value))
                        }
                    }
                )
                return await tally(rounds)
            }
        }

        @Test(.timeLimit(.minutes(5)))
        func aSuspendedGetRacingItsCancellationResumesOnceEitherWay() async {
            // The waiting tasks are suspended in get() before the race starts, one batch at a
            // time, so that a few thousand tasks at most wait at once.
            await RaceHarness.expectInterleavings(
                "fill against cancelling a suspended get",
                expected: ["\(Outcome.valueAfterSuspending(2))", "\(Outcome.cancelled)"]
            ) { size in
                let rounds = (0..<size).map { _ in Round() }
                let fixtures = rounds.map { ($0, startGet($0)) }
                RaceHarness.run(fixtures, left: { $0.0.deferred.fill(with: 2) }, right: { $0.1.cancel() })
                return await tally(rounds)
            }
        }

        @Test(.timeLimit(.minutes(5)))
        func aGetStartedAndCancelledWhileTheValueArrivesResumesOnce() async {
            await RaceHarness.expectInterleavings(
                "fill against starting and cancelling get",
                expected: ["\(Outcome.valueAfterSuspending(3))", "\(Outcome.cancelled)"]
            ) { size in
                let rounds = (0..<size).map { _ in Round() }
                RaceHarness.run(
                    rounds,
                    left: { round in
                        RaceHarness.pause(round.headStart)
                        round.deferred.fill(with: 3)
                    },
                    right: { round in
                        startGet(round).cancel()
                    }
                )
                return await tally(rounds)
            }
        }

        /// Starts a task that reads the round's future with `get()`, on this thread until it
        /// suspends, and reports how the read ended.
        @discardableResult
        private func startGet(_ round: Round) -> Task<Void, Never> {
            Task.immediate {
                do {
                    round.outcome.mustFill(with: .valueAfterSuspending(try await round.deferred.get()))
                } catch is CancellationError {
                    round.outcome.mustFill(with: .cancelled)
                } catch {
                    round.outcome.mustFill(with: .failed)
                }
            }
        }

        /// How many rounds ended each way, once every waiting task has reported.
        private func tally(_ rounds: [Round]) async -> [String: Int] {
            var counts: [String: Int] = [:]
            for round in rounds {
                counts["\(await round.outcome.value)", default: 0] += 1
            }
            return counts
        }
    }
}

/// The calling thread.
///
/// A task may ask which thread it runs on through a synchronous function;
/// here that only tells whether the task was suspended and resumed elsewhere.
private func currentThread() -> Thread {
    Thread.current
}
