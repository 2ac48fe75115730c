import Deferred
import Dispatch
import TestSupport
import Testing

extension StressSuites {
    /// Guarantee 8 stage by stage under real races: a dependent taking the path below a stage
    /// (see `DemandState`) against that stage's cancellation, its handler, or a second dependent.
    ///
    /// Each round builds `root → top → middle`, runs the race, then lets the root succeed.
    @Suite struct AttemptDemandRaceStressTests {
        final class Round: Sendable {
            let root = DeferredAttempt<Int, TestError>()
            let stopped = Counter()
            let topRuns = Counter()
            let middleRuns = Counter()
            let endRuns = Counter()
            let delivered = Counter()
            let order = Counter()
            let leftPlace = Counter()
            let rightPlace = Counter()
            let top: Attempt<Int, TestError>
            let middle: Attempt<Int, TestError>
            let end = Deferred<Attempt<Int, TestError>>()

            init() {
                root.onCancel { [stopped] in stopped.increment() }
                top = root.attempt.map(upon: .immediate) { [topRuns] in
                    topRuns.increment()
                    return $0 + 1
                }
                middle = top.map(upon: .immediate) { [middleRuns] in
                    middleRuns.increment()
                    return $0 + 1
                }
            }

            func derive() -> Attempt<Int, TestError> {
                middle.map(upon: .immediate) { [endRuns] in
                    endRuns.increment()
                    return $0 + 1
                }
            }

            /// Records that one side's call returned: `place` counts its position, from 1.
            func returned(_ place: Counter) {
                let position = order.increment()
                for _ in 0...position {
                    place.increment()
                }
            }

            var interleaving: String {
                leftPlace.value < rightPlace.value ? "left returned first" : "right returned first"
            }
        }

        enum Race: String, CaseIterable, CustomTestStringConvertible {
            /// `middle.cancel()` against `middle.map { }`: in both orders nothing needs the
            /// producer any more.
            case cancelAgainstContinuing
            /// `middle.map { }.cancel()` twice at once: in both orders nothing needs anything.
            case twoContinuingAtOnce
            /// `middle.map { }` with a handler against the root's success, which releases the
            /// middle's path unit as the new stage takes a fresh one: the new stage still runs.
            case continuingAgainstTheRootsSuccess
            /// `middle.uponSuccess { }` against `middle.map { }.cancel()`: the handler keeps
            /// the middle and everything above it, unless the cancel left nothing needing the
            /// producer before the handler came.
            case handlerAgainstContinuingThenCancelling
            /// `top.uponSuccess { }` against `middle.cancel()`: the top runs and the middle never,
            /// unless the cancel left nothing needing the producer before the handler came.
            case handlerAboveAgainstCancel

            var testDescription: String { rawValue }

            /// The interleavings each race must show: the order of the two calls' returns, or,
            /// where the handler may come too late, whether the work was kept.
            var interleavings: Set<String> {
                switch self {
                case .cancelAgainstContinuing, .twoContinuingAtOnce, .continuingAgainstTheRootsSuccess:
                    ["left returned first", "right returned first"]
                case .handlerAgainstContinuingThenCancelling, .handlerAboveAgainstCancel:
                    ["kept for the handler", "cancelled before the handler"]
                }
            }
        }

        @Test(arguments: Race.allCases)
        func takingThePathRacesWithTheStage(_ race: Race) {
            RaceHarness.expectInterleavings(
                race.rawValue,
                expected: race.interleavings,
                setup: Round.init,
                left: { round in
                    switch race {
                    case .cancelAgainstContinuing, .handlerAboveAgainstCancel:
                        round.middle.cancel()
                    case .handlerAgainstContinuingThenCancelling:
                        round.middle.uponSuccess(.immediate) { [delivered = round.delivered] _ in delivered.increment()
                        }
                    case .twoContinuingAtOnce:
                        round.derive().cancel()
                    case .continuingAgainstTheRootsSuccess:
                        let end = round.derive()
                        end.uponSuccess(.immediate) { [delivered = round.delivered] _ in delivered.increment() }
                        round.end.fill(with: end)
                    }
                    round.returned(round.leftPlace)
                },
                right: { round in
                    switch race {
                    case .cancelAgainstContinuing:
                        round.end.fill(with: round.derive())
                    case .handlerAgainstContinuingThenCancelling, .twoContinuingAtOnce:
                        round.derive().cancel()
                    case .handlerAboveAgainstCancel:
                        round.top.uponSuccess(.immediate) { [delivered = round.delivered] _ in delivered.increment() }
                    case .continuingAgainstTheRootsSuccess:
                        round.root.succeed(with: 0)
                    }
                    round.returned(round.rightPlace)
                },
                classify: { round in
                    let succeeded = round.root.succeed(with: 0)
                    if race == .continuingAgainstTheRootsSuccess {
                        #expect(!succeeded && round.stopped.value == 0)
                        #expect(round.topRuns.value == 1 && round.middleRuns.value == 1 && round.endRuns.value == 1)
                        #expect(round.end.peek()?.peek() == .success(3), "the new stage is needed by its handler")
                        #expect(round.delivered.value == 1)
                        return round.interleaving
                    }
                    #expect(round.endRuns.value == 0, "no stage below a cancellation runs")
                    switch race {
                    case .continuingAgainstTheRootsSuccess:
                        return round.interleaving
                    case .cancelAgainstContinuing, .twoContinuingAtOnce:
                        #expect(!succeeded && round.stopped.value == 1, "nothing needs the producer")
                        #expect(round.topRuns.value == 0 && round.middleRuns.value == 0)
                        #expect(round.end.peek()?.isCancelled ?? true)
                        return round.interleaving
                    case .handlerAgainstContinuingThenCancelling, .handlerAboveAgainstCancel:
                        let keptMiddle = race == .handlerAgainstContinuingThenCancelling
                        guard succeeded else {
                            #expect(round.stopped.value == 1)
                            #expect(round.topRuns.value == 0 && round.middleRuns.value == 0)
                            #expect(round.delivered.value == 0, "a handler on a cancelled attempt never sees a success")
                            return "cancelled before the handler"
                        }
                        #expect(round.stopped.value == 0)
                        #expect(round.topRuns.value == 1 && round.middleRuns.value == (keptMiddle ? 1 : 0))
                        #expect(round.delivered.value == 1)
                        return "kept for the handler"
                    }
                }
            )
        }
    }

    /// A handler pinning a stage whose path below was taken (so the pin takes a side unit of its
    /// own) races the stage's decision, which releases what the stage holds: in either order the
    /// unit is released exactly once, so once the stage below is cancelled, nothing needs the
    /// producer any more and it is told to stop.
    @Suite struct AttemptPinAgainstDecisionRaceStressTests {
        final class Round: Sendable {
            let root = DeferredAttempt<Int, TestError>()
            let stopped = Counter()
            let timers = HeldTimers()
            let limited: Attempt<Int, TestError>
            let below: Attempt<Int, TestError>
            /// Another stage on the producer, which keeps it needed after the limited stage is
            /// decided, so that a pin coming after the decision still takes its unit.
            let keeper: Attempt<Int, TestError>
            let handled = Counter()
            let pinnedUndecided = Counter()

            init() {
                root.onCancel { [stopped] in stopped.increment() }
                limited = root.attempt.timeout(after: .seconds(3_600), upon: timers, failingWith: .timedOut)
                below = limited.map(upon: .immediate) { $0 }
                keeper = root.attempt.map(upon: .immediate) { $0 }
            }
        }

        @Test func aPinRacingTheStagesTimeoutReleasesItsUnitOnce() {
            RaceHarness.expectInterleavings(
                "pin against the stage's timeout",
                expected: ["pinned before the decision", "pinned after the decision"],
                setup: Round.init,
                left: { round in
                    round.timers.fireAll()  // The limit passes: the stage is decided.
                },
                right: { round in
                    if round.limited.peek() == nil {
                        round.pinnedUndecided.increment()
                    }
                    round.limited.upon(.immediate) { [handled = round.handled] _ in handled.increment() }
                },
                classify: { round in
                    round.below.cancel()
                    round.keeper.cancel()
                    #expect(round.limited.peek() == .failure(.timedOut))
                    #expect(round.handled.value == 1)
                    #expect(round.stopped.value == 1, "nothing needs the producer once the other stages are cancelled")
                    #expect(round.root.succeed(with: 0) == false)
                    round.timers.discardAll()
                    return round.pinnedUndecided.value == 1 ? "pinned before the decision" : "pinned after the decision"
                }
            )
        }
    }
}
