import Deferred
import Synchronization
import TestSupport
import Testing

extension StressSuites {
    /// The loss of a writer against `cancel()` and against a reader arriving: one of them
    /// decides, every handler runs once, and the producer is told to stop only if the
    /// cancellation won.
    @Suite struct AbandonRaceStressTests {
        /// Half the usual rounds: LostWriterStressTests races the loss against much more.
        static let rounds = TestSize.current.raceRounds / 2

        enum Abandonable: CancellableError, AbandonableError, Equatable {
            case cancelled, abandoned
        }

        /// The state one round shares between the two threads.
        final class Round: Sendable {
            let slot: Mutex<HeldWriter<Int, Abandonable>?>
            let attempt: Attempt<Int, Abandonable>
            let stage: Attempt<Int, Abandonable>
            let stopped = Counter()
            let delivered = Counter()
            let late = Counter()

            init() {
                let writer = HeldWriter<Int, Abandonable>()
                writer.onCancel { [stopped] in stopped.increment() }
                attempt = writer.attempt
                stage = attempt.map(upon: .immediate) { $0 }
                slot = Mutex(writer)
            }

            /// Releases the writer: the last reference goes on this thread.
            func loseTheWriter() {
                let writer = slot.withLock { $0.take() }
                blackHole(writer)
            }
        }

        @Test func aLostWriterAgainstCancelDecidesOnceAndStopsTheProducerOnlyIfCancelled() {
            RaceHarness.expectInterleavings(
                "writer lost against cancel()",
                rounds: Self.rounds,
                expected: ["abandoned first", "cancelled first"],
                setup: Round.init,
                left: { round in round.loseTheWriter() },
                right: { round in
                    round.stage.uponFailure(.immediate) { [delivered = round.delivered] _ in delivered.increment() }
                    round.stage.cancel()
                },
                classify: { round in
                    #expect(round.stage.isCancelled == true)
                    switch round.attempt.peek() {
                    case .failure(.abandoned):
                        #expect(round.stopped.value == 0, "a lost writer is not a cancellation")
                        // The stage's own cancellation may still come before the loss reaches it.
                        let stage = round.stage.peek()
                        #expect(stage == .failure(.abandoned) || stage == .failure(.cancelled))
                        #expect(round.delivered.value <= (stage == .failure(.abandoned) ? 1 : 0))
                        return "abandoned first"
                    case .failure(.cancelled):
                        #expect(round.stopped.value == 1)
                        #expect(round.delivered.value == 0, "cancel() withdraws the delivery")
                        return "cancelled first"
                    case let other:
                        Issue.record("the attempt ended as \(String(describing: other))")
                        return "other"
                    }
                }
            )
        }

        @Test func aLostWriterAgainstANewReaderAnswersItOnce() {
            RaceHarness.expectInterleavings(
                "writer lost against a new handler",
                rounds: Self.rounds,
                expected: ["lost before the handler", "handler before the loss"],
                setup: Round.init,
                left: { round in round.loseTheWriter() },
                right: { round in
                    let seenPending = round.attempt.peek() == nil
                    round.attempt.upon(.immediate) { [delivered = round.delivered] _ in delivered.increment() }
                    if !seenPending {
                        round.late.increment()
                    }
                },
                classify: { round in
                    #expect(round.delivered.value == 1, "the handler ran exactly once")
                    #expect(round.attempt.peek() == .failure(.abandoned))
                    #expect(round.stopped.value == 0)
                    return round.late.value == 1 ? "lost before the handler" : "handler before the loss"
                }
            )
        }
    }
}
