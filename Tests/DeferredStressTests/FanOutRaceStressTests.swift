import Deferred
import Synchronization
import TestSupport
import Testing

extension StressSuites {
    /// Guarantees 2 and 3 for fan-outs under real races: handlers beyond the first share chunks
    /// of slots, which registrants on any thread claim while the fill closes them.
    @Suite struct FanOutRaceStressTests {
        /// Handlers per side: with the inline slot they fill chunks of 2, 4, 8 and 16 slots and
        /// start one of 32.
        static let width = 40

        /// One round: every handler counts its runs, and each side's run order is recorded.
        final class Round: Sendable {
            let deferred = Deferred<Int>()
            let runs = (0..<2 * width).map { _ in Counter() }
            let ranOnLeft = OrderRecorder(count: 2 * width)
            let ranOnRight = OrderRecorder(count: 2 * width)
            let ranElsewhere = OrderRecorder(count: 2 * width)

            /// Adds handlers `range`, in order, each recording where it ran.
            func addHandlers(_ range: Range<Int>) {
                for index in range {
                    deferred.upon(.immediate) { [self] _ in
                        runs[index].increment()
                        switch RaceHarness.currentSide {
                        case "left": ranOnLeft.record(index)
                        case "right": ranOnRight.record(index)
                        default: ranElsewhere.record(index)
                        }
                    }
                }
            }

            /// Checks that the handlers of `registrants` (each the handlers one thread added)
            /// each ran once, and that every thread ran each registrant's handlers in the order
            /// they were added.
            func expectEachRanOnceInOrder(_ registrants: [Range<Int>]) {
                for added in registrants {
                    let counts = added.map { runs[$0].value }
                    #expect(counts.allSatisfy { $0 == 1 }, "runs per handler: \(counts)")
                    for recorder in [ranOnLeft, ranOnRight, ranElsewhere] {
                        let order = recorder.order.filter(added.contains)
                        #expect(order == order.sorted(), "a thread ran handlers in the order \(order)")
                    }
                }
            }
        }

        @Test func aFanOutRacingTheFillRunsEachHandlerOnceAndInOrder() {
            RaceHarness.expectInterleavings(
                "fill against forty upons",
                rounds: TestSize.current.raceRounds,
                expected: ["all before the fill", "some before the fill", "all after the fill"],
                setup: Round.init,
                left: { $0.deferred.fill(with: 1) },
                right: { $0.addHandlers(0..<Self.width) },
                classify: { round in
                    round.expectEachRanOnceInOrder([0..<Self.width])
                    switch round.ranOnLeft.order.count {
                    case Self.width: return "all before the fill"
                    case 0: return "all after the fill"
                    default: return "some before the fill"
                    }
                }
            )
        }

        @Test func fanOutsFromTwoThreadsShareTheChunksAndEachRunsOnceInOrder() {
            RaceHarness.expectInterleavings(
                "forty upons against forty upons",
                rounds: TestSize.current.raceRounds,
                expected: ["left's first", "right's first", "interleaved"],
                setup: Round.init,
                left: { $0.addHandlers(0..<Self.width) },
                right: { $0.addHandlers(Self.width..<2 * Self.width) },
                classify: { round in
                    round.deferred.fill(with: 1)
                    round.expectEachRanOnceInOrder([0..<Self.width, Self.width..<2 * Self.width])
                    let sides = round.ranElsewhere.order.map { $0 < Self.width ? "left" : "right" }
                    let changes = zip(sides, sides.dropFirst()).filter { $0 != $1 }.count
                    switch (changes, sides.first) {
                    case (1, "left"): return "left's first"
                    case (1, "right"): return "right's first"
                    default: return "interleaved"
                    }
                }
            )
        }
    }
}
