import Deferred
import Dispatch
import TestSupport
import Testing

extension StressSuites {
    /// Guarantees 8–10 under real races: `cancel()` against the producer's result, and against
    /// the start of a step.
    ///
    /// Each race runs `TestSize.current.raceRounds` rounds on two threads and counts the
    /// interleavings it names.
    /// What the race threads see is counted and checked afterwards, where `#expect` has a test.
    @Suite struct AttemptRaceStressTests {
        /// The state one round shares between the two threads.
        final class Round: Sendable {
            let writer = DeferredAttempt<Int, TestError>()
            let stopped = Counter()
            let stepRuns = Counter()
            let delivered = Counter()
            /// Results not yet visible when a racing call returned.
            let invisible = Counter()
            let mapped: Attempt<Int, TestError>

            init() {
                writer.onCancel { [stopped] in stopped.increment() }
                mapped = writer.attempt.map(upon: .immediate) { [stepRuns] value in
                    stepRuns.increment()
                    return value
                }
                mapped.uponSuccess(.immediate) { [delivered] _ in delivered.increment() }
            }

            /// Checks, on a race thread, that the attempt's result is visible.
            func expectVisible(_ attempt: Attempt<Int, TestError>) {
                if attempt.peek() == nil {
                    invisible.increment()
                }
            }
        }

        /// A producer's result against `cancel()` of its attempt.
        func raceCancel(against result: Result<Int, TestError>, named name: String) {
            RaceHarness.expectInterleavings(
                name,
                expected: ["finished first", "cancelled first"],
                setup: Round.init,
                left: { round in
                    round.writer.fill(with: result)
                    round.expectVisible(round.writer.attempt)
                },
                right: { round in
                    round.writer.attempt.cancel()
                    round.expectVisible(round.writer.attempt)
                },
                classify: { round in
                    #expect(round.invisible.value == 0, "the loser returned before the winner was visible")
                    #expect(round.writer.attempt.isCancelled == true, "cancel() was called")
                    if round.writer.peek() == result {
                        #expect(round.stopped.value == 0, "a producer that finished is not told to stop")
                        // The cancel may withdraw the step's delivery if it had not started.
                        let mapped = round.mapped.peek()
                        #expect(mapped == result || mapped == .failure(.cancelled))
                        let ranStep = mapped.map { (try? $0.get()) != nil } ?? false
                        #expect(round.stepRuns.value == (ranStep ? 1 : 0))
                        #expect(round.delivered.value == round.stepRuns.value)
                        return "finished first"
                    }
                    #expect(round.writer.peek() == .failure(.cancelled))
                    #expect(round.stopped.value == 1)
                    #expect(round.mapped.peek() == .failure(.cancelled))
                    #expect(round.mapped.isCancelled == true)
                    #expect(round.stepRuns.value == 0 && round.delivered.value == 0)
                    return "cancelled first"
                }
            )
        }

        @Test func cancelAgainstSucceedDecidesOnceAndTheLoserSeesTheWinner() {
            raceCancel(against: .success(1), named: "cancel against succeed")
        }

        @Test func cancelAgainstFailDecidesOnceAndTheLoserSeesTheWinner() {
            raceCancel(against: .failure(.failed(1)), named: "cancel against fail")
        }

        /// The state of a round where the step, the delivery and `cancel()` share one serial
        /// queue, as on a screen's main queue.
        final class ScreenRound: Sendable {
            let writer = DeferredAttempt<Int, TestError>()
            let screen = DispatchQueue(label: "screen")
            let stepRuns = Counter()
            let delivered = Counter()
            let cancelReturned = Counter()
            /// Steps and deliveries that started after `cancel()` returned.
            let lateStarts = Counter()
            let mapped: Attempt<Int, TestError>

            init() {
                mapped = writer.attempt.map(upon: screen) { [stepRuns, cancelReturned, lateStarts] value in
                    if cancelReturned.value > 0 {
                        lateStarts.increment()
                    }
                    stepRuns.increment()
                    return value
                }
                mapped.uponSuccess(screen) { [delivered, cancelReturned, lateStarts] _ in
                    if cancelReturned.value > 0 {
                        lateStarts.increment()
                    }
                    delivered.increment()
                }
            }
        }

        @Test func aStepOrDeliveryNeverStartsAfterCancelReturns() {
            RaceHarness.expectInterleavings(
                "cancel against a step's start",
                expected: ["delivered", "cancelled before the step", "cancelled after the step"],
                setup: ScreenRound.init,
                left: { $0.writer.succeed(with: 1) },
                right: { round in
                    round.screen.sync {
                        round.mapped.cancel()
                        round.cancelReturned.increment()
                    }
                },
                classify: { round in
                    round.screen.sync {}
                    #expect(round.lateStarts.value == 0, "a step or delivery started after cancel() returned")
                    #expect(round.stepRuns.value <= 1)
                    #expect(round.delivered.value <= round.stepRuns.value)
                    #expect(round.mapped.isCancelled == true)
                    if round.delivered.value == 1 {
                        #expect(round.mapped.peek() == .success(1), "delivered before the cancel")
                        return "delivered"
                    }
                    if round.stepRuns.value == 1 {
                        return "cancelled after the step"
                    }
                    #expect(round.mapped.peek() == .failure(.cancelled))
                    return "cancelled before the step"
                }
            )
        }
    }
}
