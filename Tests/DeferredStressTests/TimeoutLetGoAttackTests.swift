import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

// Attacks on guarantee 16 for time limits: a limit that passes lets go of the work above it (its
// producer's cancel handlers run) before any delivery of the timed-out attempt, or of an attempt
// derived from it, unless something else needs the work; exactly once, without deadlock, at any
// depth. Public API only.

/// A producer whose last cancel handler counts its runs; an optional slow handler runs first
/// (a producer that stops a request, say).
private final class LGWork: Sendable {
    let writer = DeferredAttempt<Int, TestError>()
    let stopped = Counter()
    /// Cancel handlers that started.
    let stopping = Counter()

    init(slowStopNanoseconds: UInt64 = 0) {
        writer.onCancel { [stopping] in stopping.increment() }
        if slowStopNanoseconds > 0 {
            writer.onCancel { lgSpin(nanoseconds: slowStopNanoseconds) }
        }
        writer.onCancel { [stopped] in stopped.increment() }
    }

    var attempt: Attempt<Int, TestError> { writer.attempt }

    /// Whether the source is cancelled or finished, as a reader sees it now.
    var settled: Bool { attempt.isCancelled || attempt.peek() != nil }
}

private func lgSpin(nanoseconds: UInt64) {
    let until = DispatchTime.now().uptimeNanoseconds + nanoseconds
    while DispatchTime.now().uptimeNanoseconds < until {}
}

/// Alternates between rounds, so that both orders of callback and dependent are raced.
private let lgToggle = Atomic<Int>(0)

/// Whether `result` is a limit's failure.
private func lgTimedOut(_ result: Result<Int, TestError>?) -> Bool {
    result == .failure(.timedOut)
}

extension StressSuites {
    /// Attacks on a time limit letting go of its work (guarantee 16), races included.
    @Suite struct TimeoutLetGoAttackTests {
        /// Where the limit sits, and what continues it.
        enum Shape: String, CaseIterable, Sendable {
            case plain, mapped, nested, andThen, fallback, delay, secondLimit
        }

        /// What races the limit passing.
        enum Event: String, CaseIterable, Sendable {
            case succeed, fail, cancelSource, cancelLimited, cancelTail
        }

        /// One round of a race: a work, a limit on it (after a `map`, or inside another limit, by
        /// shape), a stage after the limit, and what their callbacks saw.
        final class Round: Sendable {
            let clock = VirtualTimeExecutor()
            let delays = VirtualTimeExecutor()
            fileprivate let work = LGWork()
            let limited: Attempt<Int, TestError>
            let tail: Attempt<Int, TestError>
            /// The work's stop count times 10, plus 1 if the source was settled, as the limited
            /// attempt's inline callback saw them.
            fileprivate let limitedSaw = Sighting()
            /// The work's stop count as the tail's inline callback saw it.
            fileprivate let tailSaw = Sighting()
            /// The stop count as a recovery or fallback step saw it.
            fileprivate let stepSaw = Sighting()
            let eventDecided = Counter()
            let invisible = Counter()

            init(shape: Shape) {
                let callbackFirst = lgToggle.add(1, ordering: .relaxed).oldValue % 2 == 0
                let source = work.attempt
                switch shape {
                case .mapped:
                    limited = source.map(upon: .immediate) { $0 }
                        .timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
                case .nested:
                    limited = source.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
                        .map(upon: .immediate) { $0 }
                        .timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
                default:
                    limited = source.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
                }
                let limitedCallback: @Sendable (Result<Int, TestError>) -> Void = {
                    [limitedSaw, work] _ in
                    limitedSaw.record(work.stopped.value * 10 + (work.settled ? 1 : 0))
                }
                if callbackFirst {
                    limited.upon(.immediate, execute: limitedCallback)
                }
                switch shape {
                case .plain, .mapped:
                    tail = limited.map(upon: .immediate) { $0 + 1 }
                case .nested:
                    tail = limited.recover(upon: .immediate) { [stepSaw, work] _ in
                        stepSaw.record(work.stopped.value)
                        return -1
                    }
                case .andThen:
                    tail = limited.andThen(upon: .immediate) { Attempt(succeededWith: $0) }
                case .fallback:
                    tail = limited.fallback(upon: .immediate) { [stepSaw, work] _ in
                        stepSaw.record(work.stopped.value)
                        return Attempt(succeededWith: -2)
                    }
                case .delay:
                    tail = limited.delay(by: .zero, upon: delays)
                case .secondLimit:
                    tail = limited.timeout(after: .seconds(10), upon: clock, failingWith: .failed(10))
                }
                if !callbackFirst {
                    limited.upon(.immediate, execute: limitedCallback)
                }
                tail.upon(.immediate) { [tailSaw, work] _ in tailSaw.record(work.stopped.value) }
            }

            func perform(_ event: Event) {
                switch event {
                case .succeed:
                    if work.writer.succeed(with: 1) {
                        eventDecided.increment()
                    } else if work.attempt.peek() == nil {
                        invisible.increment()
                    }
                case .fail:
                    if work.writer.fail(with: .failed(7)) {
                        eventDecided.increment()
                    } else if work.attempt.peek() == nil {
                        invisible.increment()
                    }
                case .cancelSource:
                    work.attempt.cancel()
                    if work.attempt.peek() == nil { invisible.increment() }
                case .cancelLimited:
                    limited.cancel()
                    if limited.peek() == nil { invisible.increment() }
                case .cancelTail:
                    tail.cancel()
                    if tail.peek() == nil { invisible.increment() }
                }
            }
        }

        /// The limit passing (virtual time, on one thread) against each way the work, the limited
        /// attempt or its dependent decides (on another), for each shape: the work is stopped at
        /// most once, and every callback that learns of the timeout finds it stopped, unless the
        /// work finished first or another thread is the one stopping it.
        @Test(arguments: Shape.allCases, Event.allCases)
        func theLimitRacingEveryOtherDecisionLetsGoFirst(shape: Shape, event: Event) {
            let expected: Set<String> =
                switch event {
                case .succeed: ["finished", "timed out"]
                case .fail: ["finished", "timed out"]
                case .cancelSource: ["source cancelled", "timed out"]
                case .cancelLimited: ["cancelled", "timed out"]
                // A delay's tail is decided only once the test runs its executor.
                case .cancelTail: shape == .delay ? ["tail cancelled"] : ["tail cancelled", "tail decided"]
                }
            // 35 races, each a fifth of the usual rounds (together seven times one race's), and a
            // tenth under ThreadSanitizer, which slows each round some twentyfold: every pairing
            // still shows both outcomes, and the harness runs more rounds while one is missing.
            RaceHarness.expectInterleavings(
                "limit (\(shape)) against \(event)",
                rounds: TestSize.attack.raceRounds / (TestSize.underThreadSanitizer ? 10 : 5),
                expected: expected,
                setup: { Round(shape: shape) },
                left: { round in round.perform(event) },
                right: { round in round.clock.advance(by: .seconds(1)) },
                classify: { round in Self.classify(round, shape: shape, event: event) })
        }

        private static func classify(_ round: Round, shape: Shape, event: Event) -> String {
            _ = round.delays.runUntilIdle()
            let work = round.work
            let stopped = work.stopped.value
            let limited = round.limited.peek()
            let source = work.attempt.peek()
            #expect(round.invisible.value == 0, "a losing call returned before the winner's result was visible")
            #expect(stopped <= 1 && work.stopping.value == stopped, "the work is stopped at most once")
            #expect(round.limitedSaw.count <= 1 && round.tailSaw.count <= 1 && round.stepSaw.count <= 1)
            #expect(limited != nil, "the limit passed")
            #expect((stopped == 1) == (source == .failure(.cancelled)), "stopped if and only if cancelled")
            if event != .cancelLimited {
                #expect(round.limitedSaw.count == 1, "the limited attempt's callback ran once")
            }
            if event != .cancelLimited && event != .cancelTail {
                #expect(round.tailSaw.count == 1, "the tail's callback ran once")
            }
            // The one thread that stops the work is the one that delivers, unless the source's
            // own cancel on the other thread is telling it to stop as the limit passes.
            // So may a cancel of the outer of two limits, which finds the inner one stopping it.
            let ordered = event != .cancelSource && !(event == .cancelLimited && shape == .nested)
            if lgTimedOut(limited) && round.limitedSaw.count == 1 {
                #expect(
                    round.limitedSaw.value % 10 == 1,
                    "a timed-out callback found its source neither cancelled nor finished")
                if ordered {
                    #expect(
                        round.limitedSaw.value / 10 == stopped, "the limited attempt's callback ran before the stop")
                }
            }
            // A tail cancelled by its own cancel() gets its callbacks run by that call, which
            // stops nothing while the limited attempt's callback holds the work.
            let tailCancelledItself = event == .cancelTail && round.tail.peek() == .failure(.cancelled)
            if ordered && (lgTimedOut(limited) || limited == .failure(.cancelled)) {
                if round.tailSaw.count == 1 && !tailCancelledItself {
                    #expect(round.tailSaw.value == stopped, "the tail's callback ran before the stop")
                }
                if round.stepSaw.count == 1 {
                    #expect(round.stepSaw.value == stopped, "the step after the limit ran before the stop")
                }
            }
            switch event {
            case .succeed, .fail:
                let own: Result<Int, TestError> = event == .succeed ? .success(1) : .failure(.failed(7))
                #expect((round.eventDecided.value == 1) == (source == own))
                if limited == own {
                    #expect(stopped == 0)
                    return "finished"
                }
                #expect(lgTimedOut(limited), "unexpected \(String(describing: limited))")
                #expect(source == own || stopped == 1)
                return "timed out"
            case .cancelSource:
                #expect(stopped == 1 && source == .failure(.cancelled))
                if limited == .failure(.cancelled) {
                    #expect(round.limitedSaw.value == 11)
                    return "source cancelled"
                }
                #expect(lgTimedOut(limited), "unexpected \(String(describing: limited))")
                return "timed out"
            case .cancelLimited:
                #expect(stopped == 1 && round.limited.isCancelled)
                if limited == .failure(.cancelled) {
                    #expect(round.tail.peek() == .failure(.cancelled))
                    return "cancelled"
                }
                #expect(lgTimedOut(limited), "unexpected \(String(describing: limited))")
                return "timed out"
            case .cancelTail:
                // The limited attempt's own callback holds it: the tail giving up leaves the work
                // to it, and the limit stops it.
                #expect(stopped == 1)
                #expect(lgTimedOut(limited))
                #expect(round.tail.isCancelled)
                return round.tail.peek() == .failure(.cancelled) ? "tail cancelled" : "tail decided"
            }
        }
    }
}

/// Readers that arrive as the limit passes, and readers that give up.
extension StressSuites.TimeoutLetGoAttackTests {
    /// How a late reader reads the limited attempt.
    enum LateReader: String, CaseIterable, Sendable {
        case upon, map, wait
    }

    /// A reader that arrives just as the limit passes gets the timeout once.
    ///
    /// It polls `peek()` on another thread, then adds a callback, derives a `map`, or was blocked
    /// in `wait`; the work is told to stop once, and the reader finds it cancelled. `stopping`
    /// counts the producer's first cancel handler starting.
    ///
    /// Its delivery is not ordered after the producer's cancel handlers: the limit claims the
    /// source's cancellation, publishes its result and then runs them (so that they, on the
    /// expiring thread, may read, wait on or cancel the timed-out attempt without deadlock), and a
    /// reader on another thread that arrives in between runs at once. Only the deliveries added
    /// before the limit passes are ordered after them (a known limit, the ErrorsAndCancellation
    /// guide); the count is reported.
    @Test(.timeLimit(.minutes(1)), arguments: LateReader.allCases)
    func aReaderArrivingAsTheLimitPassesFindsTheWorkStopped(reader: LateReader) {
        final class LateRound: Sendable {
            let clock = VirtualTimeExecutor()
            fileprivate let work = LGWork(slowStopNanoseconds: 20_000)
            let limited: Attempt<Int, TestError>
            fileprivate let saw = Sighting()

            init() {
                limited = work.attempt.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
            }
        }
        let rounds = (0..<1_000).map { _ in LateRound() }
        RaceHarness.run(
            rounds,
            left: { round in
                if reader == .wait {
                    _ = round.limited.wait(until: .now() + 10)
                    round.saw.record(round.work.stopping.value + (round.work.settled ? 10 : 0))
                    return
                }
                let deadline = DispatchTime.now().uptimeNanoseconds + 1_000_000_000
                while round.limited.peek() == nil && DispatchTime.now().uptimeNanoseconds < deadline {}
                let record: @Sendable (Result<Int, TestError>) -> Void = { [saw = round.saw, work = round.work] _ in
                    saw.record(work.stopping.value + (work.settled ? 10 : 0))
                }
                if reader == .upon {
                    round.limited.upon(.immediate, execute: record)
                } else {
                    round.limited.map(upon: .immediate) { $0 }.upon(.immediate, execute: record)
                }
            },
            right: { round in round.clock.advance(by: .seconds(1)) })
        let early = rounds.count { $0.saw.value % 10 == 0 }
        #expect(rounds.allSatisfy { $0.saw.count == 1 && $0.work.stopped.value == 1 })
        #expect(rounds.allSatisfy { $0.saw.value >= 10 }, "a reader found the work neither cancelled nor finished")
        #expect(rounds.allSatisfy { $0.limited.peek() == .failure(.timedOut) })
        progress("late \(reader) readers that ran before the producer's cancel handlers: \(early) of \(rounds.count)")
    }

    /// Where a task awaits: the limited attempt itself, or a `map` of it.
    enum Awaited: String, CaseIterable, Sendable {
        case limited, tail
    }

    /// A task, the only consumer, awaits the limited attempt (or a stage after it) and is cancelled
    /// as the limit passes: it resumes once; the work is stopped once either way, and a task
    /// that gets the timeout finds it stopped.
    @Test(.timeLimit(.minutes(1)), arguments: Awaited.allCases)
    func aWaitingTaskCancelledAsTheLimitPassesStopsTheWorkOnce(awaited: Awaited) async {
        final class TaskRound: Sendable {
            let clock = VirtualTimeExecutor()
            fileprivate let work = LGWork()
            let limited: Attempt<Int, TestError>
            let awaitedAttempt: Attempt<Int, TestError>

            init(_ awaited: Awaited) {
                limited = work.attempt.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
                awaitedAttempt = awaited == .limited ? limited : limited.map(upon: .immediate) { $0 }
            }
        }
        await RaceHarness.expectInterleavings(
            "limit against the cancellation of a task awaiting the \(awaited)", rounds: TestSize.attack.raceRounds,
            expected: ["timed out", "cancelled"]
        ) { size in
            let rounds = (0..<size).map { _ in TaskRound(awaited) }
            let tasks = rounds.map { round in
                Task.immediate { () -> (TestError?, Int) in
                    do {
                        _ = try await round.awaitedAttempt.get()
                        return (nil, round.work.stopped.value)
                    } catch {
                        return (error as? TestError, round.work.stopped.value)
                    }
                }
            }
            let pairs = zip(rounds, tasks).map { $0 }
            RaceHarness.run(
                pairs, left: { pair in pair.1.cancel() }, right: { pair in pair.0.clock.advance(by: .seconds(1)) })
            var counts: [String: Int] = [:]
            for (round, task) in pairs {
                let (error, stoppedAtResume) = await task.value
                #expect(round.work.stopped.value == 1, "the work is stopped once, whoever gave up first")
                #expect(round.work.attempt.peek() == .failure(.cancelled))
                let name: String
                switch error {
                case .timedOut?:
                    #expect(stoppedAtResume == 1, "the task learnt of the timeout before the work was told to stop")
                    name = "timed out"
                case .cancelled?:
                    name = "cancelled"
                default:
                    name = "unexpected \(String(describing: error))"
                }
                counts[name, default: 0] += 1
            }
            return counts
        }
    }
}

/// Joins and shared runs around limits.
extension StressSuites.TimeoutLetGoAttackTests {
    /// Two works each with a limit at the same instant, joined, the second succeeding as they pass.
    ///
    /// The join's callback finds the first work stopped, and the second stopped or finished.
    @Test(arguments: ["allSucceeded", "firstSucceeded"])
    func joinsOfLimitsPassingTogetherAgainstAWorkFinishing(join: String) {
        final class JoinRound: Sendable {
            let clock = VirtualTimeExecutor()
            fileprivate let first = LGWork()
            fileprivate let second = LGWork()
            let joined: Attempt<Int, TestError>
            fileprivate let saw = Sighting()

            init(all: Bool) {
                let clock = clock
                let inputs = [first.attempt, second.attempt].map { attempt in
                    attempt.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
                }
                joined = all ? inputs.allSucceeded().map(upon: .immediate) { $0.reduce(0, +) } : inputs.firstSucceeded()
                joined.upon(.immediate) { [saw, first, second] _ in
                    saw.record(first.stopped.value * 100 + second.stopped.value * 10 + (second.settled ? 1 : 0))
                }
            }
        }
        let all = join == "allSucceeded"
        RaceHarness.expectInterleavings(
            "\(join) of two limits against the second work finishing",
            rounds: TestSize.attack.raceRounds,
            expected: all ? ["second stopped", "second finished"] : ["succeeded", "timed out"],
            setup: { JoinRound(all: all) },
            left: { round in _ = round.second.writer.succeed(with: 2) },
            right: { round in round.clock.advance(by: .seconds(1)) },
            classify: { round in
                #expect(round.saw.count == 1)
                #expect(round.first.stopped.value == 1 && round.second.stopped.value <= 1)
                let second = round.second.stopped.value
                let result = round.joined.peek()
                if !all && result == .success(2) {
                    // The join settles with the second input while the first input's limit is
                    // passing on the other thread: it finds the first input decided, and that
                    // thread lets go of the first work; the join does not wait for it (a known
                    // limit, the ErrorsAndCancellation guide), so its callback may come first.
                } else {
                    #expect(round.saw.value / 100 == 1, "the join's callback ran before the timed-out work was stopped")
                }
                #expect(
                    round.saw.value % 10 == 1, "the join's callback found the second work neither stopped nor finished")
                #expect(
                    round.saw.value / 10 % 10 == second, "the join's callback ran before the second work was stopped")
                #expect((second == 1) == (round.second.attempt.peek() == .failure(.cancelled)))
                if all {
                    #expect(lgTimedOut(result))
                    return second == 1 ? "second stopped" : "second finished"
                }
                if result == .success(2) {
                    #expect(second == 0)
                    return "succeeded"
                }
                #expect(lgTimedOut(result), "unexpected \(String(describing: result))")
                return "timed out"
            })
    }

    /// Two callers of a shared run, each with a limit at the same instant, one giving up.
    ///
    /// The second gives up as the limits pass. The run's work is stopped exactly once, and a
    /// caller that times out last finds it stopped.
    @Test func sharedRunCallersWithLimitsAgainstACallerGivingUp() {
        final class SharedRound: Sendable {
            let clock = VirtualTimeExecutor()
            let shared = SharedAttempts<Int, Int, TestError>()
            fileprivate let work: LGWork
            let first: Attempt<Int, TestError>
            let second: Attempt<Int, TestError>
            fileprivate let firstSaw = Sighting()
            fileprivate let secondSaw = Sighting()

            init() {
                let work = LGWork()
                self.work = work
                let start: (Int) -> Attempt<Int, TestError> = { _ in work.attempt }
                first = shared.attempt(for: 1, start: start).timeout(
                    after: .seconds(1), upon: clock, failingWith: .timedOut)
                second = shared.attempt(for: 1, start: start).map(upon: .immediate) { $0 }.timeout(
                    after: .seconds(1), upon: clock, failingWith: .timedOut)
                first.upon(.immediate) { [firstSaw, work] _ in firstSaw.record(work.stopped.value) }
                second.upon(.immediate) { [secondSaw, work] _ in secondSaw.record(work.stopped.value) }
            }
        }
        RaceHarness.expectInterleavings(
            "shared run callers' limits against a caller giving up",
            rounds: TestSize.attack.raceRounds,
            expected: ["second cancelled", "second timed out"],
            setup: SharedRound.init,
            left: { round in round.second.cancel() },
            right: { round in round.clock.advance(by: .seconds(1)) },
            classify: { round in
                #expect(round.work.stopped.value == 1)
                #expect(lgTimedOut(round.first.peek()))
                #expect(round.firstSaw.count == 1 && round.secondSaw.count <= 1)
                if lgTimedOut(round.second.peek()) {
                    // The second limit passes after the first: its callback is the last delivery.
                    #expect(round.secondSaw.count == 0 || round.secondSaw.value == 1)
                    return "second timed out"
                }
                #expect(round.second.peek() == .failure(.cancelled))
                #expect(round.secondSaw.count == 1, "cancel() delivered the cancellation once")
                return "second cancelled"
            })
    }
}

/// Limits measured by Dispatch queues, in real time.
extension StressSuites.TimeoutLetGoAttackTests {
    /// Limits of 100 to 500 µs on Dispatch queues against the work succeeding around them.
    ///
    /// Each has a `map` on a concurrent queue and a second limit after it; the work succeeds at a
    /// random moment around the limit. Callbacks added before the limit passed see the work
    /// stopped (if it was) and the source settled; everything runs once.
    @Test(.timeLimit(.minutes(2)))
    func dispatchLimitsWithDerivedStagesAgainstTheWork() {
        let slowed = TestSize.underThreadSanitizer ? 20 : 1
        let count = TestSize.attack.raceRounds / slowed
        let queues = (0..<2).map { DispatchQueue(label: "let-go limit \($0)") }
        let concurrent = DispatchQueue(label: "let-go maps", attributes: .concurrent)
        let works = (0..<count).map { _ in LGWork() }
        let limitedSaw = (0..<count).map { _ in Sighting() }
        let tailSaw = (0..<count).map { _ in Sighting() }
        let early = (0..<count).map { _ in Counter() }
        let limited = (0..<count).map { _ in Deferred<Attempt<Int, TestError>>() }
        let tails = (0..<count).map { _ in Deferred<Attempt<Int, TestError>>() }
        let done = DispatchGroup()
        DispatchQueue.concurrentPerform(iterations: count) { index in
            let work = works[index]
            let attempt = work.attempt.timeout(
                after: .microseconds(Int.random(in: 100...500)), upon: queues[index % 2], failingWith: .timedOut)
            done.enter()
            done.enter()
            attempt.upon(.immediate) { [saw = limitedSaw[index]] _ in
                saw.record(work.stopped.value * 10 + (work.settled ? 1 : 0))
                done.leave()
            }
            let tail = attempt.map(upon: concurrent) { $0 }
                .timeout(after: .seconds(30), upon: queues[(index + 1) % 2], failingWith: .failed(30))
            tail.upon(.immediate) { [saw = tailSaw[index]] _ in
                saw.record(work.stopped.value)
                done.leave()
            }
            if attempt.peek() != nil {
                // Under load the limit may pass before the callbacks were added: those are not
                // ordered (see aReaderArrivingAsTheLimitPassesFindsTheWorkStopped).
                early[index].increment()
            }
            limited[index].fill(with: attempt)
            tails[index].fill(with: tail)
            RaceHarness.pause(Int.random(in: 0..<600_000 / slowed))
            _ = work.writer.succeed(with: index)
        }
        #expect(done.wait(timeout: .now() + 60) == .success)
        var outcomes: [String: Int] = [:]
        for index in 0..<count {
            let stopped = works[index].stopped.value
            #expect(limitedSaw[index].count == 1 && tailSaw[index].count == 1)
            #expect(stopped <= 1)
            let result = limited[index].peek()?.peek()
            #expect(tails[index].peek()?.peek() == result)
            #expect((stopped == 1) == (works[index].attempt.peek() == .failure(.cancelled)))
            guard early[index].value == 0 else {
                outcomes["limit passed before the callbacks", default: 0] += 1
                continue
            }
            switch result {
            case .success(index):
                #expect(stopped == 0)
                outcomes["succeeded", default: 0] += 1
            case .failure(.timedOut):
                #expect(
                    limitedSaw[index].value == stopped * 10 + 1,
                    "the callback ran before the stop, or found the source unsettled")
                #expect(tailSaw[index].value == stopped, "the derived stage's callback ran before the stop")
                outcomes[stopped == 1 ? "timed out, stopped" : "timed out, finished", default: 0] += 1
            case let other:
                Issue.record("unexpected \(String(describing: other))")
            }
        }
        progress("dispatch limits with derived stages against succeed: \(outcomes)")
    }
}

/// Re-entrant calls from the producer's cancel handler, on the thread where the limit passes.
extension StressSuites.TimeoutLetGoAttackTests {
    enum Reentry: String, CaseIterable, Sendable {
        case limitedIsCancelled, tailIsCancelled, sourceIsCancelled, cancelTail, cancelSource, cancelLimited
        case deriveLimit, deriveMapAndPeek, joinWithLimited, waitLimited, limitTheSourceAgain
    }

    @Test(arguments: Reentry.allCases, [false, true])
    func reentrantCallsFromTheStopNeitherDeadlockNorBreakTheOrder(reentry: Reentry, nested: Bool) {
        let clock = VirtualTimeExecutor()
        let work = LGWork()
        let first = work.attempt.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
        let limited =
            nested
            ? first.map(upon: .immediate) { $0 }.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
            : first
        let tail = limited.map(upon: .immediate) { $0 + 1 }
        let tailSaw = Sighting()
        tail.upon(.immediate) { _ in tailSaw.record(work.stopped.value) }
        let reentered = Counter()
        let problems = NSLocked<[String]>([])
        let note: @Sendable (Bool, String) -> Void = { ok, message in
            if !ok { problems.withLock { $0.append(message) } }
        }
        work.writer.onCancel {
            reentered.increment()
            switch reentry {
            case .limitedIsCancelled:
                note(limited.isCancelled == false, "limited.isCancelled")
                // The outer of two limits is decided by the inner one's delivery, after the stop.
                note(nested ? limited.peek() == nil : lgTimedOut(limited.peek()), "limited.peek")
            case .tailIsCancelled:
                note(tail.isCancelled == false, "tail.isCancelled")
            case .sourceIsCancelled:
                note(work.attempt.isCancelled, "source.isCancelled")
                note(work.attempt.peek() == .failure(.cancelled), "source.peek")
            case .cancelTail:
                tail.cancel()
                note(tail.peek() == .failure(.cancelled), "tail cancelled before its step")
            case .cancelSource:
                work.attempt.cancel()
                note(work.attempt.peek() == .failure(.cancelled), "source.peek after cancel")
            case .cancelLimited:
                limited.cancel()
                note(limited.peek() == (nested ? .failure(.cancelled) : .failure(.timedOut)), "limited after cancel")
            case .deriveLimit:
                let again = limited.timeout(after: .seconds(5), upon: clock, failingWith: .failed(5))
                note(nested ? again.peek() == nil : lgTimedOut(again.peek()), "a limit of the limited attempt")
            case .deriveMapAndPeek:
                let mapped = limited.map(upon: .immediate) { $0 }.peek()
                note(nested ? mapped == nil : lgTimedOut(mapped), "a map of the limited attempt")
            case .joinWithLimited:
                note([limited, Attempt(succeededWith: 5)].firstSucceeded().peek() == .success(5), "join")
            case .waitLimited:
                if nested {
                    // Its result comes after the stop returns: a short wait times out.
                    note(limited.wait(until: .now() + 0.01) == nil, "wait")
                } else {
                    note(lgTimedOut(limited.wait(until: .now() + 5)), "wait")
                }
            case .limitTheSourceAgain:
                let again = work.attempt.timeout(after: .seconds(5), upon: clock, failingWith: .failed(5))
                note(
                    again.peek() == .failure(.cancelled),
                    "a limit of the stopped source: \(String(describing: again.peek()))")
            }
        }
        let finished = DispatchSemaphore(value: 0)
        Thread {
            clock.advance(by: .seconds(1))
            finished.signal()
        }.start()
        #expect(finished.wait(timeout: .now() + 10) == .success, "the expiring thread deadlocked")
        #expect(problems.withLock { $0 } == [])
        #expect(reentered.value == 1)
        #expect(work.stopped.value == 1)
        // The outer of two limits is needed only by the tail: cancelling the tail before the
        // outer attempt has its result leaves it unneeded, so it is cancelled too.
        let outerCancelled = nested && (reentry == .cancelLimited || reentry == .cancelTail)
        #expect(limited.peek() == (outerCancelled ? .failure(.cancelled) : .failure(.timedOut)))
        #expect(tailSaw.count == 1)
        #expect(tailSaw.value == 1, "the tail's callback ran before the stop returned")
        switch reentry {
        case .cancelTail, .cancelLimited:
            #expect(tail.peek() == .failure(.cancelled))
        default:
            #expect(lgTimedOut(tail.peek()))
        }
    }
}

/// Failure types other than `TestError`.
extension StressSuites.TimeoutLetGoAttackTests {
    struct PlainError: Error, Equatable {
        let code: Int
    }

    /// A failure type without a cancellation error, and `any Error` with its `TimeoutError`: the
    /// work is stopped before the callbacks, as for any other.
    @Test func aLimitLetsGoForEveryFailureType() {
        let clock = VirtualTimeExecutor()
        let stopped = Counter()
        let plain = DeferredAttempt<Int, PlainError>()
        plain.onCancel { stopped.increment() }
        let plainLimited = plain.attempt.timeout(after: .seconds(1), upon: clock, failingWith: PlainError(code: 1))
        let plainSaw = Sighting()
        plainLimited.map(upon: .immediate) { $0 }.upon(.immediate) { _ in plainSaw.record(stopped.value) }
        plainLimited.upon(.immediate) { _ in plainSaw.record(stopped.value) }

        let anyStopped = Counter()
        let any = DeferredAttempt<Int, any Error>()
        any.onCancel { anyStopped.increment() }
        let anyLimited = any.attempt.map(upon: .immediate) { $0 }.timeout(after: .seconds(1), upon: clock)
        let anySaw = Sighting()
        anyLimited.recover(upon: .immediate) { _ in
            anySaw.record(anyStopped.value)
            return 0
        }.upon(.immediate) { _ in anySaw.record(anyStopped.value) }

        let customStopped = Counter()
        let custom = DeferredAttempt<Int, PlainError>(cancellationError: PlainError(code: -1))
        custom.onCancel { customStopped.increment() }
        let customLimited = custom.attempt.timeout(after: .seconds(1), upon: clock, failingWith: PlainError(code: 2))
            .mapError(upon: .immediate) { $0 }
        let customSaw = Sighting()
        customLimited.upon(.immediate) { _ in customSaw.record(customStopped.value) }

        clock.advance(by: .seconds(1))
        #expect(plainLimited.peek() == .failure(PlainError(code: 1)))
        #expect(stopped.value == 1 && plainSaw.count == 2 && plainSaw.value == 1)
        #expect(anyStopped.value == 1 && anySaw.count == 2 && anySaw.value == 1)
        if case .failure(let error)? = anyLimited.peek() {
            #expect(error is TimeoutError)
        } else {
            Issue.record("the any Error limit did not fail")
        }
        #expect(customLimited.peek() == .failure(PlainError(code: 2)))
        #expect(customStopped.value == 1 && customSaw.value == 1)
        #expect(custom.attempt.peek() == .failure(PlainError(code: -1)))
        // The producer without a cancellation error may still finish; the limit's result stays.
        _ = plain.succeed(with: 3)
        #expect(plainLimited.peek() == .failure(PlainError(code: 1)))
        #expect(stopped.value == 1)
    }
}

/// Deep chains of limits, on a small stack, released entirely.
extension StressSuites.TimeoutLetGoAttackTests {
    enum DeepEnd: String, CaseIterable, Sendable {
        /// Every limit passes at the same instant (innermost first).
        case expireTogether
        /// The outermost limit passes first, then each one inside it.
        case outermostFirst
        /// The tail is cancelled before any limit passes.
        case cancelTail
        /// Nobody can decide the chain any more: tail and writer dropped before the limits.
        case dropEverything
    }

    /// A chain `timeout → map → timeout → map …` as deep as the run's depth, whose maps capture
    /// tracked objects: ends without overflowing a small stack, stops the work once before the
    /// tail's callback, and releases every capture.
    @Test(.skippedUnderThreadSanitizer, arguments: DeepEnd.allCases)
    func deepAlternatingChainsOfLimitsLetGoAndRelease(end: DeepEnd) async {
        let depth = TestSize.attack.depth
        let outcome = await onDeepStack("alternating limits and maps, \(end)", size: .attack) { () -> [Int] in
            let live = LiveCount()
            let clock = VirtualTimeExecutor()
            let stopped = Counter()
            let saw = Sighting()
            var result = -100
            var stoppedAtCancel = -1
            do {
                let work = LGWork()
                work.writer.onCancel { stopped.increment() }
                var chain = work.attempt
                let pairs = depth / 2
                for level in 0..<pairs {
                    let limit: Duration = end == .outermostFirst ? .microseconds(pairs - level) : .seconds(1)
                    let tracked = LifetimeTracked(live)
                    chain = chain.timeout(after: limit, upon: clock, failingWith: .failed(level))
                        .map(upon: .immediate) { value in withExtendedLifetime(tracked) { value } }
                }
                let tail = chain
                if end != .dropEverything {
                    tail.upon(.immediate) { _ in saw.record(stopped.value) }
                }
                switch end {
                case .expireTogether, .outermostFirst:
                    clock.advance(by: .seconds(1))
                case .cancelTail:
                    tail.cancel()
                    stoppedAtCancel = stopped.value
                    clock.advance(by: .seconds(1))
                case .dropEverything:
                    break
                }
                if case .failure(.failed(let level))? = tail.peek() {
                    result = level
                } else if tail.peek() == .failure(.cancelled) {
                    result = -1
                } else if tail.peek() == nil {
                    result = -2
                }
            }
            let liveBeforeClock = live.value
            clock.advance(by: .seconds(2))
            return [result, stopped.value, saw.count, saw.value, stoppedAtCancel, liveBeforeClock, live.value]
        }
        let pairs = depth / 2
        switch end {
        case .expireTogether:
            #expect(outcome == [0, 1, 1, 1, -1, 0, 0])
        case .outermostFirst:
            #expect(outcome == [pairs - 1, 1, 1, 1, -1, 0, 0])
        case .cancelTail:
            // cancel() runs the tail's callback with the cancellation (before it tells the work to
            // stop, as for any cancel: not a decision of the stage's own); the work is stopped as
            // cancel() returns.
            #expect(outcome[0] == -1 && outcome[1] == 1 && outcome[2] == 1 && outcome[4] == 1)
            #expect(outcome[5] == 0 && outcome[6] == 0)
        case .dropEverything:
            // The work's writer is lost, so it is orphaned; each limit can still decide its stage
            // (guarantee 17), so the chain waits for them, and is released whole once they pass.
            #expect(outcome[6] == 0, "a dropped chain of limits kept its captures after them: \(outcome)")
            #expect(outcome[1] == 0, "an orphaned work is not told to stop")
        }
    }

    /// Many chains of limits, each dropped as its limit passes on a Dispatch queue or cancelled
    /// at its tail at random: every capture is released.
    @Test(.timeLimit(.minutes(1)))
    func chainsOfDispatchLimitsReleaseEverything() {
        let live = LiveCount()
        let count = TestSize.attack.raceRounds / (TestSize.underThreadSanitizer ? 20 : 1)
        let queue = DispatchQueue(label: "let-go release")
        let stopped = (0..<count).map { _ in Counter() }
        let ran = (0..<count).map { _ in Counter() }
        let writers = NSLocked<[DeferredAttemptBox<Int, TestError>]>([])
        DispatchQueue.concurrentPerform(iterations: count) { index in
            let writer = DeferredAttempt<Int, TestError>()
            writer.onCancel { [counter = stopped[index]] in counter.increment() }
            let tracked = LifetimeTracked(live)
            let tail = writer.attempt
                .timeout(after: .microseconds(Int.random(in: 100...500)), upon: queue, failingWith: .timedOut)
                .map(upon: .immediate) { value in withExtendedLifetime(tracked) { value } }
                .timeout(after: .microseconds(Int.random(in: 100...500)), upon: queue, failingWith: .failed(2))
            tail.upon(.immediate) { [counter = ran[index]] _ in counter.increment() }
            // The producer keeps its writer: only the limits or the cancel end the chain.
            let box = DeferredAttemptBox(writer)
            writers.withLock { $0.append(box) }
            if index % 3 == 0 {
                RaceHarness.pause(Int.random(in: 0..<300_000))
                tail.cancel()
            }
        }
        let deadline = ContinuousClock.now + .seconds(20)
        while (live.value != 0 || !stopped.allSatisfy({ $0.value == 1 })) && ContinuousClock.now < deadline {
            queue.sync {}
            Thread.sleep(forTimeInterval: 0.001)
        }
        #expect(live.value == 0, "captures of decided chains of limits still alive while their writers live")
        #expect(stopped.allSatisfy { $0.value == 1 }, "every work is stopped exactly once")
        #expect(ran.allSatisfy { $0.value <= 1 })
        #expect(writers.withLock { $0.count } == count)
    }
}
