import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

// Attacks on the change that took reference counting out of the Attempt wing's joins and cancel
// handlers: a join's input link that carries its position (`.indexedLink`), joins that take and
// link their inputs by position, a join's tracked bit read while it takes its inputs, held inputs
// moved out on release, and a root's cancel handlers read borrowed (`onCancel`, the end of its
// demand). Public API only.

/// A failure type with no cancellation error: cancelling tells the producer and leaves the
/// attempt pending.
enum JRPlainError: Error, Equatable {
    case failed
}

/// One value passed between the two sides of a round, behind an NSLock (Synchronization's Mutex
/// reads as an access race to ThreadSanitizer on Linux).
final class JRBox<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value?

    init(_ value: Value? = nil) {
        self.value = value
    }

    func set(_ new: Value) {
        lock.withLock { value = new }
    }

    func take() -> Value? {
        lock.withLock {
            defer { value = nil }
            return value
        }
    }

    var current: Value? {
        lock.withLock { value }
    }
}

let jrReasons: [CancellationReason] = [.cancelled, .deadlinePassed, .unneeded]

/// A producer whose cancel handlers count their runs and record why, capturing a token counted
/// in `live`, so that a handler that is never released shows.
final class JRInput: Sendable {
    let writer = DeferredAttempt<Int, TestError>()
    let cancels = Counter()
    let reason = Sighting()

    init(live: LiveCount) {
        let token = LifetimeTracked(live)
        writer.onCancel(reporting: { [cancels, reason] why in
            cancels.increment()
            reason.record(jrReasons.firstIndex(of: why)!)
            withExtendedLifetime(token) {}
        })
    }

    var attempt: Attempt<Int, TestError> { writer.attempt }

    var stopReason: CancellationReason? {
        reason.count == 0 ? nil : jrReasons[reason.value]
    }

    /// Finished as it should be after its consumers finished or gave up: succeeded with `value`
    /// and never told to stop, or stopped exactly once and cancelled.
    func isSettledOnce(value: Int) -> Bool {
        switch writer.peek() {
        case .success(let got): got == value && cancels.value == 0
        case .failure(.cancelled): cancels.value == 1
        default: false
        }
    }
}

/// How a join is made from inputs, read as the list of its values.
enum JRJoin: String, CaseIterable, Sendable, CustomStringConvertible {
    case all, first, and

    var description: String { rawValue }

    func make(_ inputs: [Attempt<Int, TestError>]) -> Attempt<[Int], TestError> {
        switch self {
        case .all:
            inputs.allSucceeded()
        case .first:
            inputs.firstSucceeded().map(upon: .immediate) { [$0] }
        case .and:
            inputs[0].and(inputs[1], inputs[2]).map(upon: .immediate) { (values: (Int, Int, Int)) in
                [values.0, values.1, values.2]
            }
        }
    }

    func count(_ requested: Int) -> Int {
        self == .and ? 3 : requested
    }
}

/// Whole seconds after the clock's start; -1 for `nil`.
func jrSeconds(_ instant: VirtualTimeExecutor.Instant?) -> Int {
    instant.map { Int($0.sinceStart.components.seconds) } ?? -1
}

/// The arguments of the join races: each join, at 1, 2, 3 and 100 inputs (`and` at 3 only).
let jrJoinSizes: [(JRJoin, Int)] =
    [JRJoin.all, .first].flatMap { join in [1, 2, 3, 100].map { (join, $0) } } + [(.and, 3)]

extension StressSuites {
    @Suite struct JoinRefcountAttackTests {
        /// The rounds of a race over joins of `inputs` inputs; half under ThreadSanitizer, which
        /// instruments each of the nodes a round makes and whose CI stage they lengthened most.
        static func rounds(_ inputs: Int = 1) -> Int {
            let rounds = inputs >= 100 ? max(20, TestSize.attack.raceRounds / 10) : TestSize.attack.raceRounds
            return TestSize.underThreadSanitizer ? max(10, rounds / 2) : rounds
        }

        // MARK: A root's cancel handlers, read borrowed

        /// One round: a producer registering two cancel handlers on one side while its attempt
        /// ends on the other, in one of several ways.
        final class EndRound: Sendable {
            let live = LiveCount()
            let writer = HeldWriter<Int, TestError>()
            let plainRuns = Counter()
            let reportedRuns = Counter()
            let reported = Sighting()
            let sawEnded = Sighting()
            let other = HeldWriter<Int, TestError>()
            fileprivate let consumer = JRBox<Attempt<Int, TestError>>()

            init(_ end: String) {
                switch end {
                case "consumerGivesUp":
                    consumer.set(writer.attempt.map(upon: .immediate) { $0 })
                case "joinCancelled":
                    consumer.set([writer.attempt, other.attempt].allSucceeded().map(upon: .immediate) { $0[0] })
                default:
                    break
                }
            }
        }

        @Test(arguments: ["cancel", "succeed", "consumerGivesUp", "joinCancelled"])
        func cancelHandlersRegisteredWhileTheAttemptEnds(_ end: String) {
            RaceHarness.expectInterleavings(
                "onCancel against \(end)",
                rounds: Self.rounds(),
                expected: ["registered before the end", "registered after the end"],
                setup: { EndRound(end) },
                left: { round in
                    let ended = round.writer.isFilled
                    let first = LifetimeTracked(round.live)
                    round.writer.onCancel { [runs = round.plainRuns] in
                        runs.increment()
                        withExtendedLifetime(first) {}
                    }
                    let second = LifetimeTracked(round.live)
                    round.writer.writer.onCancel(reporting: { [runs = round.reportedRuns, seen = round.reported] why in
                        runs.increment()
                        seen.record(jrReasons.firstIndex(of: why)!)
                        withExtendedLifetime(second) {}
                    })
                    round.sawEnded.record(ended ? 1 : 0)
                },
                right: { round in
                    switch end {
                    case "cancel": round.writer.attempt.cancel()
                    case "succeed": round.writer.succeed(with: 1)
                    default: round.consumer.current?.cancel()
                    }
                },
                classify: { round in
                    let stops = end != "succeed"
                    #expect(
                        round.plainRuns.value == (stops ? 1 : 0), "plain handler ran \(round.plainRuns.value) times")
                    #expect(
                        round.reportedRuns.value == (stops ? 1 : 0),
                        "reporting handler ran \(round.reportedRuns.value) times")
                    if stops {
                        // A consumer that was all that needed it was cancelled: `cancelled` too.
                        let expected: CancellationReason = .cancelled
                        #expect(
                            round.reported.count == 1 && jrReasons[round.reported.value] == expected,
                            "reason \(round.reported.value)")
                        #expect(round.writer.peek() == .failure(.cancelled))
                    } else {
                        #expect(round.writer.peek() == .success(1))
                    }
                    #expect(round.live.value == 0, "a handler that ran or was dropped is released: \(round.live.value)")
                    // Nothing may run a second time later.
                    round.writer.attempt.cancel()
                    #expect(round.plainRuns.value == (stops ? 1 : 0) && round.reportedRuns.value == (stops ? 1 : 0))
                    return round.sawEnded.value == 1 ? "registered after the end" : "registered before the end"
                })
        }

        /// A failure type without a cancellation error: a cancel tells the producer and the
        /// attempt stays pending (the end of demand that runs the handlers out of the slot, with
        /// no decision beside it).
        final class PlainRound: Sendable {
            let live = LiveCount()
            let box = HeldWriter<Int, JRPlainError>()
            var attempt: Attempt<Int, JRPlainError> { box.attempt }
            let runs = Counter()
            let sawCancelled = Sighting()
        }

        @Test func aCancelHandlerOfAnAttemptThatCannotFailByCancellation() {
            RaceHarness.expectInterleavings(
                "onCancel against cancel, no cancellation error",
                rounds: Self.rounds(),
                expected: ["registered before", "registered after"],
                setup: PlainRound.init,
                left: { round in
                    let cancelled = round.attempt.isCancelled
                    let token = LifetimeTracked(round.live)
                    round.box.onCancel { [runs = round.runs] in
                        runs.increment()
                        withExtendedLifetime(token) {}
                    }
                    round.sawCancelled.record(cancelled ? 1 : 0)
                },
                right: { round in round.attempt.cancel() },
                classify: { round in
                    #expect(round.runs.value == 1, "ran \(round.runs.value) times")
                    #expect(round.attempt.peek() == nil, "stays pending")
                    #expect(round.live.value == 0)
                    #expect(round.box.succeed(with: 4))
                    #expect(round.attempt.peek() == .success(4))
                    #expect(round.runs.value == 1)
                    return round.sawCancelled.value == 1 ? "registered after" : "registered before"
                })
        }

        /// Two producers' threads register the first handlers at once, so both make the storage
        /// of handlers; one wins, and both handlers run once at the end (or never, on success).
        final class TwoRegistrations: Sendable {
            let live = LiveCount()
            let writer = HeldWriter<Int, TestError>()
            let left = Counter()
            let right = Counter()
        }

        @Test(arguments: ["cancel", "succeed"])
        func twoFirstRegistrationsRace(_ end: String) {
            RaceHarness.expectInterleavings(
                "two first registrations, then \(end)",
                rounds: Self.rounds(),
                expected: ["both"],
                setup: TwoRegistrations.init,
                left: { round in
                    let token = LifetimeTracked(round.live)
                    round.writer.onCancel { [runs = round.left] in
                        runs.increment()
                        withExtendedLifetime(token) {}
                    }
                },
                right: { round in
                    let token = LifetimeTracked(round.live)
                    round.writer.writer.onCancel(reporting: { [runs = round.right] _ in
                        runs.increment()
                        withExtendedLifetime(token) {}
                    })
                },
                classify: { round in
                    #expect(round.live.value == 2, "both handlers kept while pending")
                    if end == "cancel" {
                        round.writer.attempt.cancel()
                    } else {
                        round.writer.succeed(with: 1)
                    }
                    let expected = end == "cancel" ? 1 : 0
                    #expect(round.left.value == expected && round.right.value == expected)
                    #expect(round.live.value == 0)
                    return "both"
                })
        }

        /// Cancel handlers that re-enter while the storage of handlers runs them, borrowed: one
        /// registers another (it runs once, at once), one cancels again, one drops the last
        /// reference to the writer that it captured.
        @Test func cancelHandlersThatReenterWhileTheyRun() {
            let live = LiveCount()
            let runs = Counter()
            let late = Counter()
            do {
                let holder = JRBox<HeldWriter<Int, TestError>>(HeldWriter())
                let writer = holder.current!
                let attempt = writer.attempt
                let token = LifetimeTracked(live)
                writer.onCancel {
                    runs.increment()
                    writer.onCancel {
                        late.increment()
                        withExtendedLifetime(token) {}
                    }
                    attempt.cancel()
                    _ = holder.take()  // The writer is now kept only by this handler.
                }
                writer.writer.onCancel(reporting: { _ in
                    runs.increment()
                    writer.onCancel { late.increment() }
                })
                attempt.cancel()
                #expect(runs.value == 2 && late.value == 2)
                writer.onCancel { late.increment() }
                #expect(late.value == 3, "a handler added after the stop runs at once")
                #expect(attempt.peek() == .failure(.cancelled))
            }
            #expect(live.value == 0)
            #expect(runs.value == 2 && late.value == 3)
        }

        /// A writer kept only by its own cancel handler (documented as allowed) is released once the
        /// handler ran, from inside the run of the borrowed handlers.
        @Test func aWriterKeptOnlyByItsOwnCancelHandlerGoesAfterItRuns() {
            let live = LiveCount()
            let runs = Counter()
            do {
                let holder = JRBox<HeldWriter<Int, TestError>>(HeldWriter())
                let attempt = holder.current!.attempt
                do {
                    let writer = holder.take()!
                    let token = LifetimeTracked(live)
                    // The writer is kept only by its own cancel handler.
                    writer.onCancel {
                        runs.increment()
                        withExtendedLifetime((writer, token)) {}
                    }
                }
                #expect(live.value == 1)
                // A consumer that is needed for good, and a join over the attempt.
                let joined = [attempt, attempt].allSucceeded()
                joined.upon(.immediate) { _ in }
                #expect(attempt.peek() == nil, "its writer is still kept by its handler")
                attempt.cancel()
                #expect(runs.value == 1)
                #expect(joined.peek() == .failure(.cancelled))
            }
            #expect(live.value == 0)
        }

        /// One round: a producer with no consumer yet, and the other input of a join to come.
        final class MarkRound: Sendable {
            let clock = VirtualTimeExecutor()
            let live = LiveCount()
            let writer = HeldWriter<Int, TestError>()
            let other = HeldWriter<Int, TestError>()
            let runs = Counter()
            let read = Sighting()
        }

        /// The producer's first cancel handler against its first read of the deadline, which
        /// marks it tracked and gives it an empty storage of handlers too: one storage wins, and
        /// the handler runs once, as the deadline of a join made afterwards passes.
        @Test func theFirstCancelHandlerAgainstTheFirstReadOfTheDeadline() {
            RaceHarness.expectInterleavings(
                "first cancel handler against first deadline read",
                rounds: Self.rounds(),
                expected: ["read"],
                setup: MarkRound.init,
                left: { round in
                    let token = LifetimeTracked(round.live)
                    round.writer.writer.onCancel(reporting: { [runs = round.runs] why in
                        if why == .deadlinePassed { runs.increment() }
                        withExtendedLifetime(token) {}
                    })
                },
                right: { round in round.read.record(jrSeconds(round.writer.writer.deadline(on: round.clock))) },
                classify: { round in
                    #expect(round.read.value == -1, "no consumer yet: read \(round.read.value)")
                    #expect(round.live.value == 1)
                    let bounded = [round.writer.attempt, round.other.attempt].allSucceeded()
                        .deadline(at: round.clock.now + .seconds(5), on: round.clock)
                    #expect(jrSeconds(round.writer.writer.deadline(on: round.clock)) == 5)
                    round.clock.advance(by: .seconds(5))
                    #expect(round.runs.value == 1, "ran \(round.runs.value) times")
                    #expect(round.live.value == 0)
                    #expect(bounded.peek() != nil)
                    return "read"
                })
        }

        // MARK: Joins linked while their inputs finish

        // MARK: Joins linked while their inputs finish

        /// One round: `count` inputs, the join made on one side.
        final class JoinRound: Sendable {
            let live = LiveCount()
            fileprivate let inputs: [JRInput]
            fileprivate let join = JRBox<Attempt<[Int], TestError>>()
            let filledAtCreation = Sighting()
            let victimCancelledBefore = Sighting()

            init(count: Int) {
                let live = live
                inputs = (0..<count).map { _ in JRInput(live: live) }
            }

            fileprivate func make(_ kind: JRJoin) {
                let joined = kind.make(inputs.map(\.attempt))
                filledAtCreation.record(joined.isFilled ? 1 : 0)
                join.set(joined)
            }
        }

        /// The inputs succeed, last first, while the join links them: whichever were decided as
        /// they were linked, every value lands at its position.
        @Test(arguments: jrJoinSizes)
        func aJoinLinkedWhileItsInputsSucceed(_ kind: JRJoin, _ requested: Int) {
            let count = kind.count(requested)
            RaceHarness.expectInterleavings(
                "\(kind) of \(count) linked while its inputs succeed",
                rounds: Self.rounds(count),
                expected: ["decided as it was made", "decided later"],
                setup: { JoinRound(count: count) },
                left: { round in round.make(kind) },
                right: { round in
                    for (index, input) in round.inputs.enumerated().reversed() {
                        input.writer.succeed(with: index)
                    }
                },
                classify: { round in
                    let result = round.join.current?.peek()
                    switch kind {
                    case .all, .and:
                        #expect(result == .success(Array(0..<count)), "got \(String(describing: result))")
                        for input in round.inputs {
                            #expect(input.cancels.value == 0)
                        }
                    case .first:
                        guard case .success(let values) = result, values.count == 1 else {
                            Issue.record("got \(String(describing: result))")
                            break
                        }
                        #expect(round.inputs[values[0]].writer.peek() == .success(values[0]))
                        for (index, input) in round.inputs.enumerated() {
                            #expect(input.isSettledOnce(value: index), "input \(index): \(input.cancels.value) stops")
                        }
                    }
                    _ = round.join.take()
                    #expect(round.live.value == 0, "cancel handlers released after the inputs finished")
                    return round.filledAtCreation.value == 1 ? "decided as it was made" : "decided later"
                })
        }

        /// One input is cancelled while the join links: an all-join is cancelled and stops every
        /// other input exactly once; a first-join waits for the others.
        @Test(arguments: jrJoinSizes)
        func aJoinLinkedWhileAnInputIsCancelled(_ kind: JRJoin, _ requested: Int) {
            let count = kind.count(requested)
            let victim = count / 2
            RaceHarness.expectInterleavings(
                "\(kind) of \(count) linked while input \(victim) is cancelled",
                rounds: Self.rounds(count),
                expected: ["cancelled before it was made", "cancelled after"],
                setup: { JoinRound(count: count) },
                left: { round in
                    round.victimCancelledBefore.record(round.inputs[victim].writer.isFilled ? 1 : 0)
                    round.make(kind)
                },
                right: { round in round.inputs[victim].attempt.cancel() },
                classify: { round in
                    let join = round.join.current!
                    let cancelledFirst = round.victimCancelledBefore.value == 1
                    #expect(round.inputs[victim].cancels.value == 1)
                    #expect(round.inputs[victim].stopReason == .cancelled)
                    if kind == .first && count > 1 {
                        #expect(join.peek() == nil, "a first-join waits for the others")
                        for (index, input) in round.inputs.enumerated() where index != victim {
                            #expect(input.cancels.value == 0)
                        }
                        join.cancel()
                    } else {
                        #expect(join.peek() == .failure(.cancelled))
                    }
                    for (index, input) in round.inputs.enumerated() {
                        #expect(input.cancels.value == 1, "input \(index) stopped \(input.cancels.value) times")
                        #expect(input.writer.peek() == .failure(.cancelled))
                    }
                    _ = round.join.take()
                    #expect(round.live.value == 0)
                    return cancelledFirst ? "cancelled before it was made" : "cancelled after"
                })
        }

        /// One round: a join of `count` inputs with a consumer, and input 0 needed elsewhere too.
        final class GiveUpRound: Sendable {
            let live = LiveCount()
            fileprivate let inputs: [JRInput]
            fileprivate let consumer = JRBox<Attempt<[Int], TestError>>()
            fileprivate let elsewhere: Attempt<Int, TestError>
            let succeededBefore = Sighting()

            fileprivate init(_ kind: JRJoin, count: Int) {
                let live = live
                inputs = (0..<count).map { _ in JRInput(live: live) }
                elsewhere = inputs[0].attempt.map(upon: .immediate) { $0 }
                let token = LifetimeTracked(live)
                consumer.set(
                    kind.make(inputs.map(\.attempt)).map(upon: .immediate) {
                        withExtendedLifetime(token) {}
                        return $0
                    })
            }
        }

        /// The join's only consumer gives up while the inputs succeed: each input ends succeeded
        /// or stopped exactly once, and the one needed elsewhere is never stopped.
        @Test(arguments: jrJoinSizes.filter { $0.1 > 1 })
        func aJoinGivenUpWhileItsInputsSucceed(_ kind: JRJoin, _ requested: Int) {
            let count = kind.count(requested)
            RaceHarness.expectInterleavings(
                "\(kind) of \(count) given up while its inputs succeed",
                rounds: Self.rounds(count),
                expected: ["given up first", "finished first"],
                setup: { GiveUpRound(kind, count: count) },
                left: { round in
                    let consumer = round.consumer.current!
                    // Finished first: the first-join decided, or every other input of an all-join
                    // succeeded (it still waits for input 0).
                    let finished = kind == .first ? consumer.isFilled : round.inputs.last!.writer.isFilled
                    round.succeededBefore.record(finished ? 1 : 0)
                    consumer.cancel()
                },
                right: { round in
                    for (index, input) in round.inputs.enumerated().dropFirst() {
                        input.writer.succeed(with: index)
                    }
                },
                classify: { round in
                    #expect(round.inputs[0].cancels.value == 0, "input 0 is needed elsewhere")
                    #expect(round.inputs[0].writer.peek() == nil)
                    for (index, input) in round.inputs.enumerated().dropFirst() {
                        #expect(input.isSettledOnce(value: index), "input \(index): \(input.cancels.value) stops")
                    }
                    round.inputs[0].writer.succeed(with: 0)
                    _ = round.consumer.take()
                    #expect(round.live.value == 0, "\(round.live.value) handlers or steps still held")
                    return round.succeededBefore.value == 1 ? "finished first" : "given up first"
                })
        }

        // MARK: Large joins

        @Test func tenThousandInputsSucceedInOrder() {
            let live = LiveCount()
            let count = 10_000
            do {
                let inputs = (0..<count).map { _ in JRInput(live: live) }
                let join = inputs.map(\.attempt).allSucceeded()
                // Half before the join is given to a consumer, half after, out of order.
                for index in stride(from: 0, to: count, by: 2) {
                    inputs[index].writer.succeed(with: index)
                }
                let sum = Sighting()
                join.uponSuccess(.immediate) {
                    sum.record($0.enumerated().allSatisfy { $0.offset == $0.element } ? 1 : 0)
                }
                for index in stride(from: count - 1, to: 0, by: -2) {
                    inputs[index].writer.succeed(with: index)
                }
                #expect(sum.count == 1 && sum.value == 1, "every value at its position")
                #expect(inputs.allSatisfy { $0.cancels.value == 0 })
            }
            #expect(live.value == 0)
        }

        @Test(arguments: JRJoin.allCases.filter { $0 != .and })
        func tenThousandInputsGivenUpAreEachStoppedOnce(_ kind: JRJoin) {
            let live = LiveCount()
            let count = 10_000
            do {
                let inputs = (0..<count).map { _ in JRInput(live: live) }
                let decided = inputs.indices.filter { $0 % 7 == 3 }
                for index in decided where index % 2 == 1 {
                    inputs[index].writer.succeed(with: index)
                }
                // An input twice, and one needed elsewhere.
                let attempts = inputs.map(\.attempt) + [inputs[5].attempt]
                let elsewhere = inputs[9].attempt.map(upon: .immediate) { $0 }
                let consumer = kind.make(attempts).map(upon: .immediate) { $0.count }
                for index in decided where index % 2 == 0 {
                    inputs[index].writer.succeed(with: index)
                }
                if kind == .first {
                    // A first-join already succeeded with the first success it linked.
                    #expect(consumer.peek() == .success(1))
                } else {
                    #expect(consumer.peek() == nil)
                }
                consumer.cancel()
                for (index, input) in inputs.enumerated() where index != 9 {
                    #expect(input.isSettledOnce(value: index), "input \(index): \(input.cancels.value) stops")
                }
                #expect(inputs[9].cancels.value == 0 && inputs[9].writer.peek() == nil)
                inputs[9].writer.succeed(with: 9)
                withExtendedLifetime(elsewhere) {}
            }
            #expect(live.value == 0)
        }

        @Test func tenThousandInputsOneFailsAndTheRestStopOnce() {
            let live = LiveCount()
            let count = 10_000
            do {
                let inputs = (0..<count).map { _ in JRInput(live: live) }
                let join = inputs.map(\.attempt).allSucceeded()
                for index in 0..<count / 2 {
                    inputs[index].writer.succeed(with: index)
                }
                inputs[count - 1].writer.fail(with: .failed(7))
                #expect(join.peek() == .failure(.failed(7)))
                for (index, input) in inputs.enumerated().dropLast() {
                    #expect(input.isSettledOnce(value: index), "input \(index): \(input.cancels.value) stops")
                }
                #expect(inputs.dropFirst(count / 2).dropLast().allSatisfy { $0.stopReason == .unneeded })
            }
            #expect(live.value == 0)
        }

        /// Collections other than arrays: a slice whose positions do not start at zero, a lazy
        /// view, and the same input at several positions.
        @Test func collectionsThatAreNotArraysAndRepeatedInputs() {
            let live = LiveCount()
            do {
                let inputs = (0..<8).map { _ in JRInput(live: live) }
                let attempts = inputs.map(\.attempt)
                let slice = attempts[3..<7]
                let sliced = slice.allSucceeded()
                let lazy = inputs.lazy.map(\.attempt).filter { _ in true }.allSucceeded()
                let repeated = [attempts[1], attempts[1], attempts[2], attempts[1]].allSucceeded()
                let contiguous = ContiguousArray(attempts.reversed()).allSucceeded()
                for (index, input) in inputs.enumerated() {
                    input.writer.succeed(with: index)
                }
                #expect(sliced.peek() == .success([3, 4, 5, 6]))
                #expect(lazy.peek() == .success(Array(0..<8)))
                #expect(repeated.peek() == .success([1, 1, 2, 1]))
                #expect(contiguous.peek() == .success(Array((0..<8).reversed())))
            }
            do {
                // A repeated input given up is stopped once.
                let input = JRInput(live: live)
                let other = JRInput(live: live)
                let join = [input.attempt, other.attempt, input.attempt, input.attempt].allSucceeded()
                let consumer = join.map(upon: .immediate) { $0 }
                consumer.cancel()
                #expect(input.cancels.value == 1 && other.cancels.value == 1)
                #expect(input.stopReason == .cancelled)
            }
            #expect(live.value == 0)
        }

        /// Joins that give up on an input that stays pending leave their links in its consumer
        /// links, which compaction removes: each join (kept alive only by its link there, and
        /// holding the value of its other input) goes, and every one goes once the input finishes.
        @Test func joinsThatGiveUpOnAPendingInputAreReleased() {
            let live = LiveCount()
            let count = 2_000
            do {
                let writer = HeldWriter<LifetimeTracked, TestError>()
                writer.attempt.upon(.immediate) { _ in }  // Needed for good: it stays pending.
                let stops = Counter()
                writer.onCancel { stops.increment() }
                var kept: [Attempt<[LifetimeTracked], TestError>] = []
                for index in 0..<count {
                    let joined = [Attempt(succeededWith: LifetimeTracked(live)), writer.attempt].allSucceeded()
                    let consumer = joined.map(upon: .immediate) { $0.count }
                    if index % 100 == 0 {
                        kept.append(joined)
                    } else {
                        consumer.cancel()
                    }
                }
                #expect(stops.value == 0)
                #expect(live.value < count / 2, "\(live.value) joins given up are still alive")
                writer.succeed(with: LifetimeTracked(live))
                #expect(kept.allSatisfy { $0.peek().flatMap { try? $0.get().count } == 2 })
            }
            #expect(live.value == 0, "\(live.value) values still held")
        }

        /// One round: forty joins over one pending input that a handler needs for good, each
        /// with the value of another input stored already.
        final class CompactionRound: Sendable {
            let live = LiveCount()
            let writer = HeldWriter<LifetimeTracked, TestError>()
            fileprivate let joins = JRBox<[Attempt<[LifetimeTracked], TestError>]>()
            fileprivate let consumers = JRBox<[Attempt<Int, TestError>]>()
            let stops = Counter()

            init() {
                writer.attempt.upon(.immediate) { _ in }
                writer.onCancel { [stops] in stops.increment() }
                var joins: [Attempt<[LifetimeTracked], TestError>] = []
                var consumers: [Attempt<Int, TestError>] = []
                for _ in 0..<40 {
                    let joined = [Attempt(succeededWith: LifetimeTracked(live)), writer.attempt].allSucceeded()
                    joins.append(joined)
                    consumers.append(joined.map(upon: .immediate) { $0.count })
                }
                self.joins.set(joins)
                self.consumers.set(consumers)
            }
        }

        /// Thirty of the joins give up (their links are removed from the input's consumer links
        /// as they go) while the input succeeds: the ten left get both values, and every join
        /// goes once released.
        @Test func joinsGivingUpWhileTheirSharedInputSucceeds() {
            RaceHarness.expectInterleavings(
                "joins give up while their shared input succeeds",
                rounds: Self.rounds(100),
                expected: ["some gave up first", "succeeded first"],
                setup: CompactionRound.init,
                left: { round in
                    for (index, consumer) in round.consumers.current!.enumerated() where index % 4 != 0 {
                        consumer.cancel()
                    }
                },
                right: { round in round.writer.succeed(with: LifetimeTracked(round.live)) },
                classify: { round in
                    let consumers = round.consumers.take()!
                    var cancelled = 0
                    for (index, consumer) in consumers.enumerated() {
                        let result = consumer.peek()
                        if index % 4 == 0 {
                            #expect(result == .success(2), "kept consumer \(index): \(String(describing: result))")
                        } else if result == .failure(.cancelled) {
                            cancelled += 1
                        } else {
                            #expect(result == .success(2), "consumer \(index): \(String(describing: result))")
                        }
                    }
                    #expect(round.stops.value == 0, "a handler needs the input for good")
                    _ = round.joins.take()
                    #expect(round.live.value == 1, "only the input's own value is left: \(round.live.value)")
                    return cancelled == 0 ? "succeeded first" : "some gave up first"
                })
        }

        // MARK: Deep chains of joins

        enum DeepEnd: String, CaseIterable, Sendable {
            case rootSucceeds, topCancelled, topGivenUp, rootCancelled
        }

        /// Joins nested as deep as the stack-safety suites go, each of the one below.
        ///
        /// On their small stack, every end runs without recursion, and the producer is told once.
        @Test(.skippedUnderThreadSanitizer, arguments: DeepEnd.allCases, [JRJoin.all, .first])
        func deepChainsOfJoins(_ end: DeepEnd, _ kind: JRJoin) async {
            let depth = TestSize.attack.depth
            let outcome = await onDeepStack("joins of joins, \(kind), \(end.rawValue)", size: .attack) {
                let live = LiveCount()
                var report: [String] = []
                do {
                    let root = JRInput(live: live)
                    var top = root.attempt
                    for level in 0..<depth {
                        switch kind {
                        case .first:
                            top =
                                level % 2 == 0
                                ? [top].firstSucceeded() : [top, Attempt(failedWith: .failed(1))].firstSucceeded()
                        default:
                            top = (level % 2 == 0 ? [top] : [Attempt(succeededWith: 0), top]).allSucceeded()
                                .map(upon: .immediate) { $0.last! }
                        }
                    }
                    let consumer = top.map(upon: .immediate) { $0 }
                    switch end {
                    case .rootSucceeds: root.writer.succeed(with: 42)
                    case .topCancelled: top.cancel()
                    case .topGivenUp: consumer.cancel()
                    case .rootCancelled: root.attempt.cancel()
                    }
                    let expected: Result<Int, TestError> = end == .rootSucceeds ? .success(42) : .failure(.cancelled)
                    if consumer.peek() != expected { report.append("top: \(String(describing: consumer.peek()))") }
                    if root.cancels.value != (end == .rootSucceeds ? 0 : 1) {
                        report.append("root stops \(root.cancels.value)")
                    }
                    if end == .topGivenUp && root.stopReason != .cancelled {
                        report.append("reason \(String(describing: root.stopReason))")
                    }
                }
                if live.value != 0 { report.append("live \(live.value)") }
                return report
            }
            #expect(outcome.isEmpty, "\(outcome)")
        }

        // MARK: Joins under deadlines

        /// One round: a producer joined with another input, a join bounded at 5 s made on one
        /// side while the producer reads its deadline on the other.
        final class DeadlineRound: Sendable {
            let clock = VirtualTimeExecutor()
            let live = LiveCount()
            fileprivate let producer: JRInput
            fileprivate let other: JRInput
            fileprivate let bounded = JRBox<Attempt<[Int], TestError>>()
            let read = Sighting()

            init() {
                let live = live
                producer = JRInput(live: live)
                other = JRInput(live: live)
            }
        }

        @Test(arguments: [JRJoin.all, .first, .and])
        func aBoundedJoinMadeWhileTheProducerReads(_ kind: JRJoin) {
            RaceHarness.expectInterleavings(
                "bounded \(kind) made while the producer reads",
                rounds: Self.rounds(),
                expected: ["read 5 s", "read none"],
                setup: DeadlineRound.init,
                left: { round in
                    let inputs = [round.producer.attempt, round.other.attempt, round.other.attempt]
                    let joined = kind.make(kind == .and ? inputs : Array(inputs.prefix(2)))
                    round.bounded.set(joined.deadline(at: round.clock.now + .seconds(5), on: round.clock))
                },
                right: { round in round.read.record(jrSeconds(round.producer.writer.deadline(on: round.clock))) },
                classify: { round in
                    #expect([-1, 5].contains(round.read.value), "read \(round.read.value)")
                    let now = jrSeconds(round.producer.writer.deadline(on: round.clock))
                    #expect(now == 5, "the 5 s join is its only consumer: reads \(now)")
                    round.clock.advance(by: .seconds(4))
                    #expect(round.producer.cancels.value == 0, "still needed until 5 s")
                    round.clock.advance(by: .seconds(1))
                    #expect(round.producer.cancels.value == 1 && round.producer.stopReason == .deadlinePassed)
                    #expect(round.other.cancels.value == 1)
                    _ = round.bounded.take()
                    #expect(round.live.value == 0)
                    return round.read.value == 5 ? "read 5 s" : "read none"
                })
        }

        /// One round: a join with a 5 s consumer; a 9 s consumer arrives on one side while the
        /// 5 s one gives up on the other.
        final class SwapRound: Sendable {
            let clock = VirtualTimeExecutor()
            let live = LiveCount()
            fileprivate let producer: JRInput
            fileprivate let other: JRInput
            let join: Attempt<[Int], TestError>
            fileprivate let five = JRBox<Attempt<[Int], TestError>>()
            fileprivate let nine = JRBox<Attempt<[Int], TestError>>()
            let read = Sighting()

            init(_ kind: JRJoin, producerAsksFirst: Bool) {
                let live = live
                producer = JRInput(live: live)
                other = JRInput(live: live)
                if producerAsksFirst {
                    _ = producer.writer.deadline(on: clock)
                }
                join = kind.make(
                    [producer.attempt, other.attempt, other.attempt].prefix(kind == .and ? 3 : 2).map { $0 })
                five.set(join.deadline(at: clock.now + .seconds(5), on: clock))
            }
        }

        @Test(arguments: [JRJoin.all, .first, .and], [false, true])
        func aLaterConsumerArrivesWhileTheEarlierGivesUp(_ kind: JRJoin, producerAsksFirst: Bool) {
            RaceHarness.expectInterleavings(
                "9 s consumer of \(kind) against the 5 s one leaving",
                rounds: max(1, Self.rounds() / 2),
                expected: ["arrived first", "left first"],
                setup: { SwapRound(kind, producerAsksFirst: producerAsksFirst) },
                left: { round in
                    round.nine.set(round.join.deadline(at: round.clock.now + .seconds(9), on: round.clock))
                    round.read.record(jrSeconds(round.producer.writer.deadline(on: round.clock)))
                },
                right: { round in round.five.take()?.cancel() },
                classify: { round in
                    let stopped = round.producer.cancels.value == 1
                    if stopped {
                        // The join lost its last consumer before the 9 s one came: it stopped.
                        #expect(round.producer.stopReason == .cancelled)
                        #expect(round.nine.current?.peek() == .failure(.cancelled))
                        #expect(round.other.cancels.value == 1)
                    } else {
                        // Nil (later than exact) while the 5 s consumer is half gone; never 5 s.
                        #expect([-1, 9].contains(round.read.value), "left read \(round.read.value)")
                        let now = jrSeconds(round.producer.writer.deadline(on: round.clock))
                        #expect(now == 9, "needed until 9 s; reads \(now)")
                        round.clock.advance(by: .seconds(8))
                        #expect(round.producer.cancels.value == 0, "the 9 s consumer still needs it")
                        round.clock.advance(by: .seconds(1))
                        #expect(round.producer.stopReason == .deadlinePassed)
                    }
                    #expect(round.producer.cancels.value == 1 && round.other.cancels.value == 1)
                    _ = round.nine.take()
                    #expect(round.live.value == 0)
                    return stopped ? "left first" : "arrived first"
                })
        }

        /// One round: an unbounded consumer (a handler) arrives on a bounded join on one side
        /// while the producer starts reading on the other: whatever the order, it ends needed
        /// for good.
        final class UnboundedRound: Sendable {
            let clock = VirtualTimeExecutor()
            let live = LiveCount()
            fileprivate let producer: JRInput
            fileprivate let other: JRInput
            let bounded: Attempt<[Int], TestError>
            let read = Sighting()

            init() {
                let live = live
                producer = JRInput(live: live)
                other = JRInput(live: live)
                bounded = [producer.attempt, other.attempt].allSucceeded().deadline(
                    at: clock.now + .seconds(5), on: clock)
            }
        }

        @Test func anUnboundedJoinConsumerArrivesWhileTheProducerReads() {
            RaceHarness.expectInterleavings(
                "unbounded join consumer against the producer reading",
                rounds: Self.rounds(),
                expected: ["read 5 s", "read none"],
                setup: UnboundedRound.init,
                left: { round in
                    // A second join over the producer, needed for good by a handler.
                    [round.producer.attempt].allSucceeded().upon(.immediate) { _ in }
                },
                right: { round in round.read.record(jrSeconds(round.producer.writer.deadline(on: round.clock))) },
                classify: { round in
                    #expect([-1, 5].contains(round.read.value))
                    #expect(round.producer.writer.deadline(on: round.clock) == nil, "a handler needs it for good")
                    round.clock.advance(by: .seconds(6))
                    #expect(round.producer.cancels.value == 0)
                    round.producer.writer.succeed(with: 1)
                    round.other.writer.succeed(with: 2)
                    return round.read.value == 5 ? "read 5 s" : "read none"
                })
        }

        /// Joins of joins under one deadline, with the producer reading as the chain is made:
        /// the deadline reaches it through every level.
        final class NestedRound: Sendable {
            let clock = VirtualTimeExecutor()
            let live = LiveCount()
            fileprivate let producer: JRInput
            fileprivate let top = JRBox<Attempt<Int, TestError>>()
            let read = Sighting()

            init() {
                producer = JRInput(live: live)
            }
        }

        @Test func nestedJoinsUnderADeadlineWhileTheProducerReads() {
            RaceHarness.expectInterleavings(
                "nested joins under a deadline",
                rounds: Self.rounds(100),
                expected: ["read 5 s", "read none"],
                setup: NestedRound.init,
                left: { round in
                    var top = round.producer.attempt
                    for level in 0..<20 {
                        top = (level % 2 == 0 ? [top, Attempt(succeededWith: 1)] : [top]).allSucceeded()
                            .map(upon: .immediate) { $0[0] }
                    }
                    round.top.set(top.deadline(at: round.clock.now + .seconds(5), on: round.clock))
                },
                right: { round in round.read.record(jrSeconds(round.producer.writer.deadline(on: round.clock))) },
                classify: { round in
                    #expect([-1, 5].contains(round.read.value))
                    #expect(jrSeconds(round.producer.writer.deadline(on: round.clock)) == 5)
                    round.clock.advance(by: .seconds(4))
                    #expect(round.producer.cancels.value == 0)
                    round.clock.advance(by: .seconds(1))
                    #expect(round.producer.stopReason == .deadlinePassed)
                    #expect(round.top.current?.peek() != nil)
                    _ = round.top.take()
                    #expect(round.live.value == 0)
                    return round.read.value == 5 ? "read 5 s" : "read none"
                })
        }
    }
}
