import Deferred
import DeferredExecutors
import Synchronization
import TestSupport
import Testing

extension StressSuites {
    /// A producer reads its deadline while consumers come and go on other threads: what it reads
    /// is never earlier than what a consumer that still needs the attempt asked for, and `nil`
    /// while a consumer without a deadline needs it.
    @Suite struct DeadlineRaceStressTests {
        static let rounds = TestSize.current.raceRounds / 2

        /// What a reading saw, as whole seconds after the clock's start: -1 for `nil`, -2 before
        /// it read.
        final class Reading: Sendable {
            private let seconds = Atomic<Int>(-2)

            func record(_ instant: VirtualTimeExecutor.Instant?) {
                seconds.store(instant.map { Int($0.sinceStart.components.seconds) } ?? -1, ordering: .releasing)
            }

            var value: Int { seconds.load(ordering: .acquiring) }
        }

        /// The state one round shares between the two threads: a producer with two consumers
        /// bounded at 3 s and 5 s, and what each side added and read.
        final class Round: Sendable {
            let writer = HeldWriter<Int, TestError>()
            let clock = VirtualTimeExecutor()
            let keeper: Attempt<Int, TestError>
            let early: Attempt<Int, TestError>
            let added = Deferred<[Attempt<Int, TestError>]>()
            let addedLate = Deferred<Attempt<Int, TestError>>()
            let left = Reading()
            let right = Reading()

            init() {
                keeper = writer.attempt.deadline(at: clock.now + .seconds(3), on: clock)
                early = writer.attempt.deadline(at: clock.now + .seconds(5), on: clock)
            }
        }

        @Test func aConsumerWithoutADeadlineAgainstALaterDeadline() {
            RaceHarness.expectInterleavings(
                "a consumer without a deadline against a later deadline",
                rounds: Self.rounds,
                expected: ["later deadline read first", "no deadline read first"],
                setup: Round.init,
                left: { round in
                    round.added.fill(with: [round.writer.attempt.map(upon: .immediate) { $0 }])
                    round.left.record(round.writer.writer.deadline(on: round.clock))
                },
                right: { round in
                    round.addedLate.fill(
                        with: round.writer.attempt.deadline(at: round.clock.now + .seconds(9), on: round.clock))
                    round.right.record(round.writer.writer.deadline(on: round.clock))
                },
                classify: { round in
                    #expect(round.left.value == -1, "a consumer without a deadline needs it")
                    #expect(round.right.value == -1 || round.right.value == 9, "never earlier: a consumer waits 9 s")
                    #expect(round.writer.writer.deadline(on: round.clock) == nil)
                    return round.right.value == 9 ? "later deadline read first" : "no deadline read first"
                }
            )
        }

        @Test func aDeadlineLeavingAgainstOneArriving() {
            RaceHarness.expectInterleavings(
                "a deadline leaving against one arriving",
                rounds: Self.rounds,
                expected: ["read with both", "read after the leaving"],
                setup: Round.init,
                left: { round in
                    round.early.cancel()
                    round.left.record(round.writer.writer.deadline(on: round.clock))
                },
                right: { round in
                    round.addedLate.fill(
                        with: round.writer.attempt.deadline(at: round.clock.now + .seconds(7), on: round.clock))
                    round.right.record(round.writer.writer.deadline(on: round.clock))
                },
                classify: { round in
                    // Once the 7 s consumer arrived, nothing earlier may be read; before, the 5 s
                    // consumer's instant stays (later than exact, never earlier). A consumer on
                    // its way in or out counts as one without a deadline for that moment.
                    #expect([-1, 7].contains(round.right.value), "the 7 s consumer needs it")
                    #expect([-1, 5, 7].contains(round.left.value))
                    #expect(round.writer.writer.deadline(on: round.clock) == round.clock.now + .seconds(7))
                    #expect(!round.writer.isCancelled, "the 3 s and 7 s consumers still need it")
                    return round.left.value == 7 ? "read with both" : "read after the leaving"
                }
            )
        }
    }
}
