import Deferred
import Foundation
import Synchronization
import TestSupport
import Testing

extension StressSuites {
    /// Guarantees 1 and 2 under real races.
    ///
    /// One value wins, and every handler runs exactly once, whether it was added before, during
    /// or after the fill. Each test runs `TestSize.current.raceRounds` rounds (2,000 quick,
    /// 100,000 at full size) on two threads and checks that every interleaving it names actually
    /// happened. The tests run one at a time so that the two threads of a race really run at once
    /// on a two-core machine.
    @Suite struct RaceStressTests {
        static var rounds: Int { TestSize.current.raceRounds }

        /// The state one round of a race shares between the two threads.
        final class Round: Sendable {
            let deferred = Deferred<Int>()
            let leftWon = Atomic<Bool>(false)
            let rightWon = Atomic<Bool>(false)
            let handlerRuns = Counter()
            let ranOn = Deferred<String>()
            let seen = Atomic<Int>(-1)
            /// Counts surprises seen on the race threads, where `#expect` has no test to report to.
            let anomalies = Counter()
        }

        @Test func ofRacingFillsExactlyOneWinsAndEveryReaderSeesItsValue() {
            RaceHarness.expectInterleavings(
                "fill against fill",
                rounds: Self.rounds,
                expected: ["left won", "right won"],
                setup: Round.init,
                left: { $0.leftWon.store($0.deferred.fill(with: 1), ordering: .relaxed) },
                right: { $0.rightWon.store($0.deferred.fill(with: 2), ordering: .relaxed) },
                classify: { round in
                    let left = round.leftWon.load(ordering: .relaxed)
                    let right = round.rightWon.load(ordering: .relaxed)
                    #expect(left != right, "exactly one fill must win")
                    #expect(round.deferred.peek() == (left ? 1 : 2))
                    return left ? "left won" : "right won"
                }
            )
        }

        @Test func aLosingFillReturnsOnlyOnceTheWinningValueIsVisible() {
            RaceHarness.expectInterleavings(
                "losing fill then peek",
                rounds: Self.rounds,
                expected: ["left won", "right won"],
                setup: Round.init,
                left: { round in
                    if !round.deferred.fill(with: 1) {
                        round.seen.store(round.deferred.peek() ?? 0, ordering: .relaxed)
                    }
                },
                right: { round in
                    if !round.deferred.fill(with: 2) {
                        round.seen.store(round.deferred.peek() ?? 0, ordering: .relaxed)
                    }
                },
                classify: { round in
                    let value = round.deferred.peek()
                    let seen = round.seen.load(ordering: .relaxed)
                    #expect(seen == value, "the losing fill read \(seen)")
                    return value == 1 ? "left won" : "right won"
                }
            )
        }

        @Test func aHandlerAddedWhileFillingRunsExactlyOnce() {
            RaceHarness.expectInterleavings(
                "fill against upon",
                rounds: Self.rounds,
                expected: ["added before the fill", "added after the fill"],
                setup: Round.init,
                left: { $0.deferred.fill(with: 7) },
                right: { round in
                    round.deferred.upon(.immediate) { value in
                        if value != 7 {
                            round.anomalies.increment()
                        }
                        round.handlerRuns.increment()
                        round.ranOn.fill(with: RaceHarness.currentSide ?? "?")
                    }
                },
                classify: { round in
                    #expect(round.handlerRuns.value == 1)
                    #expect(round.anomalies.value == 0)
                    return round.ranOn.peek() == "left" ? "added before the fill" : "added after the fill"
                }
            )
        }

        @Test func handlersBeyondTheFirstRaceTheFillExactlyOnce() {
            // The first handler takes the inline slot; the others race the fill on the overflow stack.
            RaceHarness.expectInterleavings(
                "fill against three upons",
                rounds: Self.rounds,
                expected: ["all before the fill", "some before the fill", "all after the fill"],
                setup: Round.init,
                left: { $0.deferred.fill(with: 7) },
                right: { round in
                    for _ in 0..<3 {
                        round.deferred.upon(.immediate) { _ in
                            if RaceHarness.currentSide == "left" {
                                round.seen.add(1, ordering: .relaxed)
                            }
                            round.handlerRuns.increment()
                        }
                    }
                },
                classify: { round in
                    #expect(round.handlerRuns.value == 3)
                    switch round.seen.load(ordering: .relaxed) {
                    case 2: return "all before the fill"  // seen starts at -1
                    case -1: return "all after the fill"
                    default: return "some before the fill"
                    }
                }
            )
        }

        @Test func handlersAddedFromTwoThreadsAtOnceAllRunOnce() {
            RaceHarness.expectInterleavings(
                "upon against upon",
                rounds: Self.rounds,
                expected: ["left's handler first", "right's handler first"],
                setup: Round.init,
                left: { round in
                    round.deferred.upon(.immediate) { _ in
                        round.handlerRuns.increment()
                        round.ranOn.fill(with: "left")
                    }
                },
                right: { round in
                    round.deferred.upon(.immediate) { _ in
                        round.handlerRuns.increment()
                        round.ranOn.fill(with: "right")
                    }
                },
                classify: { round in
                    #expect(round.handlerRuns.value == 0)
                    round.deferred.fill(with: 1)
                    #expect(round.handlerRuns.value == 2)
                    return "\(round.ranOn.peek() ?? "?")'s handler first"
                }
            )
        }

        @Test func peekSeesNothingOrTheWholeValue() {
            final class Payload: Sendable {
                let numbers = Array(0..<16)
            }
            final class PayloadRound: Sendable {
                let deferred = Deferred<Payload>()
                let sawValue = Atomic<Bool>(false)
                let sawWrongValue = Atomic<Bool>(false)
                /// The filling side builds its payload first, so the reader waits a little too.
                let readerDelay = Int.random(in: 0..<3_000)
            }
            RaceHarness.expectInterleavings(
                "fill against peek",
                rounds: Self.rounds,
                expected: ["peek saw nothing", "peek saw the value"],
                setup: PayloadRound.init,
                left: { $0.deferred.fill(with: Payload()) },
                right: { round in
                    RaceHarness.pause(round.readerDelay)
                    if let payload = round.deferred.peek() {
                        round.sawWrongValue.store(payload.numbers != Array(0..<16), ordering: .relaxed)
                        round.sawValue.store(true, ordering: .relaxed)
                    }
                },
                classify: { round in
                    let sawWrongValue = round.sawWrongValue.load(ordering: .relaxed)
                    #expect(!sawWrongValue)
                    return round.sawValue.load(ordering: .relaxed) ? "peek saw the value" : "peek saw nothing"
                }
            )
        }

        @Test func waitWakesForAFillOnAnotherThread() {
            RaceHarness.expectInterleavings(
                "fill against wait",
                rounds: Self.rounds,
                expected: ["filled before the wait", "wait blocked"],
                setup: Round.init,
                left: { $0.deferred.fill(with: 3) },
                right: { round in
                    let wasFilled = round.deferred.isFilled
                    if round.deferred.wait(until: .now() + 10) != 3 {
                        round.anomalies.increment()
                    }
                    round.seen.store(wasFilled ? 1 : 0, ordering: .relaxed)
                },
                classify: { round in
                    #expect(round.anomalies.value == 0, "wait returned without the value")
                    return round.seen.load(ordering: .relaxed) == 1 ? "filled before the wait" : "wait blocked"
                }
            )
        }

        @Test func isFilledNeverRunsAheadOfTheValue() {
            RaceHarness.expectInterleavings(
                "fill against isFilled",
                rounds: Self.rounds,
                expected: ["seen unfilled", "seen filled"],
                setup: Round.init,
                left: { $0.deferred.fill(with: 5) },
                right: { round in
                    let filled = round.deferred.isFilled
                    // Once isFilled says so, the value must be there for every reader.
                    if filled, round.deferred.peek() != 5 || round.deferred.wait(until: .now()) != 5 {
                        round.anomalies.increment()
                    }
                    round.seen.store(filled ? 1 : 0, ordering: .relaxed)
                },
                classify: { round in
                    #expect(round.anomalies.value == 0, "isFilled was true before the value could be read")
                    return round.seen.load(ordering: .relaxed) == 1 ? "seen filled" : "seen unfilled"
                }
            )
        }

        @Test func threeThreadsFillingAndAddingHandlersAgree() {
            // Two fillers on the harness threads, and a third thread adding handlers throughout.
            let rounds = (0..<Self.rounds / 2).map { _ in Round() }
            let adder = Thread {
                for round in rounds {
                    round.deferred.upon(.immediate) { value in
                        if value != round.deferred.peek() {
                            round.anomalies.increment()
                        }
                        round.handlerRuns.increment()
                    }
                }
            }
            adder.start()
            RaceHarness.run(
                rounds,
                left: { $0.leftWon.store($0.deferred.fill(with: 1), ordering: .relaxed) },
                right: { $0.rightWon.store($0.deferred.fill(with: 2), ordering: .relaxed) }
            )
            while !adder.isFinished {
                usleep(1_000)
            }
            for round in rounds {
                let (left, right) = (round.leftWon.load(ordering: .relaxed), round.rightWon.load(ordering: .relaxed))
                #expect(left != right)
                #expect(round.handlerRuns.value == 1)
                #expect(round.anomalies.value == 0)
            }
        }
    }
}
