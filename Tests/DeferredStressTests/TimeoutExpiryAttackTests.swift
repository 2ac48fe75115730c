import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import TestSupport
import Testing

/// A producer whose cancel handler counts its runs.
private final class Work: Sendable {
    let writer = DeferredAttempt<Int, TestError>()
    let stopped = Counter()

    init() {
        writer.onCancel { [stopped] in stopped.increment() }
    }

    var attempt: Attempt<Int, TestError> { writer.attempt }

    func succeed(with value: Int) -> Bool { writer.succeed(with: value) }

    func onCancel(_ handler: @escaping @Sendable () -> Void) { writer.onCancel(handler) }
}

/// What a timed-out attempt continues with, for the ordering checks.
enum Dependent: String, CaseIterable, Sendable {
    case none, map, mapError, recover, timeout, andThen, fallback, uponSuccess, uponFailure, delay
}

/// Adds `dependent` to `limited` on `clock`, returning the derived attempt if it makes one.
private func add(
    _ dependent: Dependent, to limited: Attempt<Int, TestError>, clock: VirtualTimeExecutor
) -> Attempt<Int, TestError>? {
    switch dependent {
    case .none:
        return nil
    case .map:
        return limited.map(upon: .immediate) { $0 + 1 }
    case .mapError:
        return limited.mapError(upon: .immediate) { $0 }
    case .recover:
        return limited.recover(upon: .immediate) { _ in -1 }
    case .timeout:
        return limited.timeout(after: .seconds(10), upon: clock, failingWith: .failed(10))
    case .andThen:
        return limited.andThen(upon: .immediate) { Attempt(succeededWith: $0) }
    case .fallback:
        return limited.fallback(upon: .immediate) { _ in Attempt(succeededWith: -2) }
    case .uponSuccess:
        limited.uponSuccess(.immediate) { _ in }
        return nil
    case .uponFailure:
        limited.uponFailure(.immediate) { _ in }
        return nil
    case .delay:
        return limited.delay(by: .zero, upon: clock)
    }
}

extension StressSuites {
    /// Attacks on the expiry of an attempt's time limit: its callbacks run after the work it gave
    /// up on was told to stop (unless something else needs it), exactly once, without deadlock.
    @Suite struct TimeoutExpiryAttackTests {
        /// Whatever continues the timed-out attempt, and whether its own callback was added before
        /// or after that dependent, the callback sees the producer told to stop; so does the
        /// dependent's callback.
        @Test(arguments: Dependent.allCases, [false, true])
        func everyCallbackOfATimedOutAttemptSeesTheWorkStopped(dependent: Dependent, callbackFirst: Bool) {
            let clock = VirtualTimeExecutor()
            let work = Work()
            let limited = work.attempt.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
            let direct = Sighting()
            let failure = Sighting()
            if callbackFirst {
                limited.upon(.immediate) { _ in direct.record(work.stopped.value) }
                limited.uponFailure(.immediate) { _ in failure.record(work.stopped.value) }
            }
            let derived = add(dependent, to: limited, clock: clock)
            if !callbackFirst {
                limited.upon(.immediate) { _ in direct.record(work.stopped.value) }
                limited.uponFailure(.immediate) { _ in failure.record(work.stopped.value) }
            }
            let downstream = Sighting()
            derived?.upon(.immediate) { _ in downstream.record(work.stopped.value) }
            clock.advance(by: .seconds(1))
            #expect(limited.peek() == .failure(.timedOut))
            #expect(direct.count == 1 && failure.count == 1, "each callback ran once")
            #expect(work.stopped.value == 1, "the work is told to stop once")
            #expect(direct.value == 1, "upon ran after the work was told to stop")
            #expect(failure.value == 1, "uponFailure ran after the work was told to stop")
            if derived != nil {
                #expect(downstream.count == 1 && downstream.value == 1, "the dependent's callback saw it stopped")
            }
        }
    }
}

extension StressSuites.TimeoutExpiryAttackTests {
    /// A delay after the timed-out attempt holds the end of the source's path: the work it gave
    /// up on should still be told to stop as the limit passes, since the delay waits only on the
    /// decided attempt (guarantee 8), not once the delay ends.
    @Test func aDelayAfterTheLimitDoesNotKeepTheWorkRunning() {
        let clock = VirtualTimeExecutor()
        let work = Work()
        let limited = work.attempt.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
        let delayed = limited.delay(by: .seconds(5), upon: clock)
        clock.advance(by: .seconds(1))
        #expect(limited.peek() == .failure(.timedOut))
        #expect(work.stopped.value == 1, "nothing waits on the work once its limit passed")
        clock.advance(by: .seconds(5))
        #expect(delayed.peek() == .failure(.timedOut))
        #expect(work.stopped.value == 1)
    }

    /// Two limits on one source: the first to pass must not stop the work the other still waits
    /// for; the second stops it, before its callbacks.
    @Test(arguments: [false, true])
    func aSourceSharedByTwoLimitsStopsOnlyWhenBothPassed(sameDeadline: Bool) {
        let clock = VirtualTimeExecutor()
        let work = Work()
        let short = work.attempt.timeout(after: .seconds(1), upon: clock, failingWith: .failed(1))
        let long = work.attempt.timeout(
            after: sameDeadline ? .seconds(1) : .seconds(2), upon: clock, failingWith: .failed(2))
        let shortSaw = Sighting()
        let longSaw = Sighting()
        short.upon(.immediate) { _ in shortSaw.record(work.stopped.value) }
        long.upon(.immediate) { _ in longSaw.record(work.stopped.value) }
        clock.advance(by: .seconds(1))
        #expect(short.peek() == .failure(.failed(1)))
        if !sameDeadline {
            #expect(work.stopped.value == 0, "the second limit still waits for the work")
            #expect(work.attempt.peek() == nil)
            #expect(shortSaw.value == 0)
            clock.advance(by: .seconds(1))
        }
        #expect(long.peek() == .failure(.failed(2)))
        #expect(work.stopped.value == 1)
        #expect(shortSaw.count == 1 && longSaw.count == 1)
        #expect(longSaw.value == 1, "the last limit's callbacks see the work stopped")
    }

    /// A limit and another consumer of the source: the limit passing leaves the work to the other
    /// consumer, which still gets the result; its giving up later stops the work.
    @Test(arguments: ["map", "upon", "waitingTask"])
    func aLimitDoesNotStopWorkAnotherConsumerNeeds(consumer: String) async {
        let clock = VirtualTimeExecutor()
        let work = Work()
        let limited = work.attempt.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
        let other: Attempt<Int, TestError>? = consumer == "map" ? work.attempt.map(upon: .immediate) { $0 * 2 } : nil
        let otherSaw = Sighting()
        if consumer == "upon" {
            work.attempt.upon(.immediate) { result in otherSaw.record((try? result.get()) ?? -1) }
        }
        let task: Task<Int, any Error>? =
            consumer == "waitingTask" ? Task.immediate { try await work.attempt.get() } : nil
        clock.advance(by: .seconds(1))
        #expect(limited.peek() == .failure(.timedOut))
        #expect(work.stopped.value == 0, "another consumer still needs the work")
        #expect(work.succeed(with: 21), "the work may still finish")
        #expect(other?.peek() ?? .success(42) == .success(42))
        if consumer == "upon" {
            #expect(otherSaw.value == 21)
        }
        if let task {
            #expect((try? await task.value) == 21)
        }
        #expect(limited.peek() == .failure(.timedOut), "the limit's result never changes")
        #expect(work.stopped.value == 0)
    }

    /// Timeouts of timeouts, whichever limit passes first or both at once: one stop, and the
    /// outer attempt's callback sees it.
    @Test(arguments: [(1, 2), (2, 1), (1, 1)])
    func nestedLimitsStopTheWorkOnceBeforeTheOuterCallbacks(inner: Int, outer: Int) {
        let clock = VirtualTimeExecutor()
        let work = Work()
        let innerLimited = work.attempt.timeout(after: .seconds(inner), upon: clock, failingWith: .failed(1))
        let outerLimited = innerLimited.timeout(after: .seconds(outer), upon: clock, failingWith: .failed(2))
        let innerSaw = Sighting()
        let outerSaw = Sighting()
        innerLimited.upon(.immediate) { _ in innerSaw.record(work.stopped.value) }
        outerLimited.upon(.immediate) { _ in outerSaw.record(work.stopped.value) }
        clock.advance(by: .seconds(2))
        #expect(work.stopped.value == 1)
        #expect(outerLimited.peek() == .failure(inner <= outer ? .failed(1) : .failed(2)))
        #expect(innerSaw.count == 1 && outerSaw.count == 1)
        // The inner attempt's own callback pins it: while it is pending, the outer limit passing
        // leaves it the work, so only the inner limit stops it.
        #expect(outerSaw.value == (outer < inner ? 0 : 1), "the outer attempt's callback sees the work stopped")
        #expect(innerSaw.value == 1, "the inner attempt's callback sees the work stopped")
    }

    /// A limit inside `allSucceeded`: the join fails with the timeout, and both producers (the one
    /// timed out, and the other the join cancels) are stopped before the join's callbacks run.
    @Test func aLimitInsideAllSucceededStopsEveryProducerBeforeTheJoinsCallbacks() {
        let clock = VirtualTimeExecutor()
        let slow = Work()
        let other = Work()
        let joined = [slow.attempt.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut), other.attempt]
            .allSucceeded()
        let saw = Sighting()
        joined.upon(.immediate) { _ in saw.record(slow.stopped.value * 10 + other.stopped.value) }
        clock.advance(by: .seconds(1))
        #expect(joined.peek() == .failure(.timedOut))
        #expect(saw.count == 1 && saw.value == 11, "both producers stopped before the join's callback")
    }

    /// A limit inside `firstSucceeded`: the timed-out input's work stops, the join waits for the
    /// other, and succeeds with it.
    @Test func aLimitInsideFirstSucceededStopsOnlyTheTimedOutWork() {
        let clock = VirtualTimeExecutor()
        let slow = Work()
        let other = Work()
        let first = [slow.attempt.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut), other.attempt]
            .firstSucceeded()
        clock.advance(by: .seconds(1))
        #expect(slow.stopped.value == 1, "the timed-out input let go of its work")
        #expect(other.stopped.value == 0)
        #expect(first.peek() == nil)
        #expect(other.succeed(with: 7))
        #expect(first.peek() == .success(7))
        #expect(other.stopped.value == 0 && slow.stopped.value == 1)
    }

    /// A retry of a timed-out work: each try's work is stopped as its limit passes (the retry no
    /// longer waits on it), so before the backoff and before the next try starts; each once.
    @Test(arguments: [0, 1])
    func aRetryOfATimedOutWorkStopsEachTryBeforeTheNextStarts(backoffSeconds: Int) {
        let clock = VirtualTimeExecutor()
        let works = NSLocked<[Work]>([])
        let stoppedBeforeStart = Counter()
        let result = Attempt<Int, TestError>.retry(attempts: 3, delay: .seconds(backoffSeconds), upon: clock) {
            let work = Work()
            works.withLock { works in
                if let previous = works.last, previous.stopped.value == 1 {
                    stoppedBeforeStart.increment()
                }
                works.append(work)
            }
            return work.attempt.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
        }
        for index in 0..<3 {
            clock.advance(by: .seconds(1))
            // With no backoff, the next try has started already: check the one that timed out.
            let stopped = works.withLock { $0[index].stopped.value }
            #expect(stopped == 1, "try \(index) is stopped as its limit passes")
            clock.advance(by: .seconds(backoffSeconds))
        }
        #expect(result.peek() == .failure(.timedOut))
        let stopped = works.withLock { $0.map(\.stopped.value) }
        #expect(stopped == [1, 1, 1])
        #expect(stoppedBeforeStart.value == 2)
    }

    /// `recover` and `andThen` around a timed-out step: the recovery and the chain's callbacks see
    /// the work stopped; an earlier step that finished is not cancelled.
    @Test func recoverAndAndThenAroundATimedOutStepSeeTheWorkStopped() {
        let clock = VirtualTimeExecutor()
        let first = Work()
        let second = Work()
        let recoverySaw = Sighting()
        let chain = first.attempt
            .andThen(upon: .immediate) { _ in
                second.attempt.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
            }
            .recover(upon: .immediate) { _ in
                recoverySaw.record(second.stopped.value)
                return -1
            }
        let chainSaw = Sighting()
        chain.upon(.immediate) { _ in chainSaw.record(second.stopped.value) }
        #expect(first.succeed(with: 1))
        clock.advance(by: .seconds(1))
        #expect(chain.peek() == .success(-1))
        #expect(recoverySaw.value == 1 && chainSaw.value == 1)
        #expect(first.stopped.value == 0 && second.stopped.value == 1)
    }

    /// A shared run whose work has a limit, and callers that each put a limit on the shared
    /// attempt: one caller's limit passing leaves the run to the others; the last stops it.
    @Test func sharedRunsWithLimitsStopTheWorkOnlyWhenNoCallerNeedsIt() {
        let clock = VirtualTimeExecutor()
        let shared = SharedAttempts<Int, Int, TestError>()
        let work = Work()
        let starts = Counter()
        let start: (Int) -> Attempt<Int, TestError> = { _ in
            starts.increment()
            return work.attempt
        }
        let first = shared.attempt(for: 1, start: start).timeout(
            after: .seconds(1), upon: clock, failingWith: .failed(1))
        let second = shared.attempt(for: 1, start: start).timeout(
            after: .seconds(2), upon: clock, failingWith: .failed(2))
        let secondSaw = Sighting()
        second.upon(.immediate) { _ in secondSaw.record(work.stopped.value) }
        #expect(starts.value == 1)
        clock.advance(by: .seconds(1))
        #expect(first.peek() == .failure(.failed(1)))
        #expect(work.stopped.value == 0, "the second caller still needs the run")
        clock.advance(by: .seconds(1))
        #expect(second.peek() == .failure(.failed(2)))
        #expect(work.stopped.value == 1)
        #expect(secondSaw.value == 1, "the last caller's callback sees the work stopped")
        // The run's own work times out: every caller sees the timeout, after the work stopped.
        let inner = Work()
        let caller = shared.attempt(for: 2) { _ in
            inner.attempt.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
        }
        let callerSaw = Sighting()
        caller.upon(.immediate) { _ in callerSaw.record(inner.stopped.value) }
        clock.advance(by: .seconds(1))
        #expect(caller.peek() == .failure(.timedOut))
        #expect(callerSaw.value == 1)
    }

    /// A task awaiting `get()` on the timed-out attempt resumes with the timeout, once, after the
    /// work was told to stop.
    @Test func aTaskAwaitingTheTimedOutAttemptResumesAfterTheWorkStopped() async {
        let clock = VirtualTimeExecutor()
        let work = Work()
        let limited = work.attempt.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
        let task = Task.immediate { () -> (TestError?, Int) in
            do {
                _ = try await limited.get()
                return (nil, work.stopped.value)
            } catch {
                return (error as? TestError, work.stopped.value)
            }
        }
        clock.advance(by: .seconds(1))
        let (error, stopped) = await task.value
        #expect(error == .timedOut)
        #expect(stopped == 1)
    }

    /// A chain of nested timeouts as deep as the run's depth, all passing at the same instant (or
    /// outermost first): no stack overflow, one stop, and the outermost callback sees it.
    @Test(.skippedUnderThreadSanitizer, arguments: [false, true])
    func deepNestedTimeoutsExpiringAtOnceAreStackSafe(outermostFirst: Bool) async {
        let depth = TestSize.attack.depth
        let outcome = await onDeepStack("nested timeouts expiring at once", size: .attack) { () -> [Int] in
            let clock = VirtualTimeExecutor()
            let work = Work()
            var limited = work.attempt
            for level in 0..<depth {
                let limit: Duration = outermostFirst ? .milliseconds(depth - level) : .seconds(1)
                limited = limited.timeout(after: limit, upon: clock, failingWith: .failed(level))
            }
            let saw = Sighting()
            limited.upon(.immediate) { _ in saw.record(work.stopped.value) }
            clock.advance(by: .seconds(1))
            let failure = limited.peek()?.failureValue
            let code: Int
            if case .failed(let level) = failure { code = level } else { code = -1 }
            return [code, work.stopped.value, saw.count, saw.value]
        }
        #expect(outcome == [outermostFirst ? depth - 1 : 0, 1, 1, 1])
    }
}

/// Re-entrant calls on the thread where the limit passes.
extension StressSuites.TimeoutExpiryAttackTests {
    /// What the producer's cancel handler or the attempt's callback does on the expiring thread.
    enum Reentry: String, CaseIterable, Sendable {
        case peekLimited, cancelLimited, waitLimited, uponLimited, succeedSource, cancelSource, waitSource
        case cancelDependent, timeoutAgain
    }

    /// Does `reentry` with the attempts of one round; returns what it saw, for the log.
    private static func perform(
        _ reentry: Reentry, work: Work, limited: Attempt<Int, TestError>, dependent: Attempt<Int, TestError>,
        clock: VirtualTimeExecutor, ran: Counter
    ) {
        switch reentry {
        case .peekLimited:
            #expect(limited.peek() == .failure(.timedOut))
            #expect(limited.isCancelled == false)
        case .cancelLimited:
            limited.cancel()
            #expect(limited.peek() == .failure(.timedOut))
        case .waitLimited:
            #expect(limited.wait(until: .now() + 5) == .failure(.timedOut))
        case .uponLimited:
            limited.upon(.immediate) { _ in ran.increment() }
        case .succeedSource:
            #expect(work.succeed(with: 1) == false)
        case .cancelSource:
            work.attempt.cancel()
            #expect(work.attempt.peek() == .failure(.cancelled))
        case .waitSource:
            #expect(work.attempt.wait(until: .now() + 5) == .failure(.cancelled))
        case .cancelDependent:
            dependent.cancel()
            #expect(dependent.peek() != nil)
        case .timeoutAgain:
            let again = limited.timeout(after: .seconds(1), upon: clock, failingWith: .failed(3))
            #expect(again.peek() == .failure(.timedOut))
        }
    }

    /// The producer's cancel handler, run as the limit passes, reads, cancels, waits on and
    /// derives from the timed-out attempt, its source and a dependent: nothing deadlocks, each
    /// handler runs once, the result does not change.
    @Test(arguments: Reentry.allCases, [false, true])
    func reentrantCallsOnTheExpiringThreadNeitherDeadlockNorChangeTheResult(
        reentry: Reentry, fromCallback: Bool
    ) {
        let clock = VirtualTimeExecutor()
        let work = Work()
        let limited = work.attempt.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
        let dependent = limited.map(upon: .immediate) { $0 }
        let ran = Counter()
        let reentered = Counter()
        let body: @Sendable () -> Void = {
            reentered.increment()
            Self.perform(reentry, work: work, limited: limited, dependent: dependent, clock: clock, ran: ran)
        }
        if fromCallback {
            limited.upon(.immediate) { _ in body() }
        } else {
            work.onCancel(body)
        }
        let dependentRan = Counter()
        dependent.upon(.immediate) { _ in dependentRan.increment() }
        let finished = DispatchSemaphore(value: 0)
        Thread {
            clock.advance(by: .seconds(1))
            finished.signal()
        }.start()
        #expect(finished.wait(timeout: .now() + 10) == .success, "the expiring thread deadlocked")
        #expect(reentered.value == 1)
        #expect(limited.peek() == .failure(.timedOut))
        if reentry == .cancelLimited && !fromCallback {
            // The work stops before any step derived from the timed-out attempt runs, so this
            // cancel comes before the dependent's step, which fails as cancelled (guarantee 14).
            #expect(dependent.peek() == .failure(.cancelled))
        } else {
            #expect(dependent.peek() == .failure(.timedOut) || reentry == .cancelDependent)
        }
        #expect(dependentRan.value == 1)
        #expect(work.stopped.value == 1)
        #expect(ran.value == (reentry == .uponLimited ? 1 : 0))
    }
}

/// Races of a limit passing against the other ways the attempts decide.
extension StressSuites.TimeoutExpiryAttackTests {
    /// One round: a work, its limit on a virtual clock, a dependent, and what their callbacks saw.
    final class Round: Sendable {
        let clock = VirtualTimeExecutor()
        let manual = ManualExecutor()
        fileprivate let work = Work()
        let limited: Attempt<Int, TestError>
        let dependent: Attempt<Int, TestError>
        /// `stopped` as the limited attempt's inline callback saw it, and its run count.
        fileprivate let limitedSaw = Sighting()
        fileprivate let dependentSaw = Sighting()
        /// Deliveries queued on `manual`, run once both sides returned.
        let queuedUpon = Counter()
        let queuedFailure = Counter()
        /// Results not visible when a racing call returned, and what the losing calls returned.
        let invisible = Counter()
        let succeeded = Counter()

        init() {
            limited = work.attempt.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
            // The dependent first: its link runs before the callbacks (see the ordering tests).
            dependent = limited.map(upon: .immediate) { $0 }
            limited.upon(.immediate) { [limitedSaw, work] _ in limitedSaw.record(work.stopped.value) }
            limited.upon(manual) { [queuedUpon] _ in queuedUpon.increment() }
            limited.uponFailure(manual) { [queuedFailure] _ in queuedFailure.increment() }
            dependent.upon(.immediate) { [dependentSaw, work] _ in dependentSaw.record(work.stopped.value) }
        }

        func expectVisible(_ attempt: Attempt<Int, TestError>) {
            if attempt.peek() == nil {
                invisible.increment()
            }
        }

        func passLimit() {
            clock.advance(by: .seconds(1))
        }

        /// Checks what holds whatever won; runs the queued deliveries.
        func checkCommon() {
            #expect(invisible.value == 0, "a losing call returned before the winner's result was visible")
            #expect(limitedSaw.count == 1 && dependentSaw.count == 1, "each callback runs exactly once")
            _ = manual.runUntilIdle()
            #expect(queuedUpon.value == 1)
            #expect(work.stopped.value <= 1)
        }
    }

    @Test func aLimitPassingAgainstTheWorkSucceedingDecidesOnceAndStopsTheWorkFirst() {
        RaceHarness.expectInterleavings(
            "limit against succeed",
            rounds: TestSize.attack.raceRounds,
            expected: ["succeeded", "timed out, work stopped", "timed out, work finished"],
            setup: Round.init,
            left: { round in
                if round.work.succeed(with: 1) {
                    round.succeeded.increment()
                } else {
                    // Lost to the limit's stop: the limited attempt's result is out already.
                    round.expectVisible(round.limited)
                    round.expectVisible(round.work.attempt)
                }
            },
            right: { round in round.passLimit() },
            classify: { round in
                round.checkCommon()
                #expect(round.queuedFailure.value == (round.limited.peek() == .success(1) ? 0 : 1))
                #expect(round.limitedSaw.value == round.work.stopped.value, "the work was stopped, if at all, first")
                #expect(round.dependentSaw.value == round.work.stopped.value)
                switch round.limited.peek() {
                case .success(1):
                    #expect(round.succeeded.value == 1 && round.work.stopped.value == 0)
                    return "succeeded"
                case .failure(.timedOut) where round.work.stopped.value == 1:
                    #expect(round.succeeded.value == 0 && round.work.attempt.peek() == .failure(.cancelled))
                    return "timed out, work stopped"
                case .failure(.timedOut):
                    #expect(round.succeeded.value == 1 && round.work.attempt.peek() == .success(1))
                    return "timed out, work finished"
                case let other:
                    return "unexpected \(String(describing: other))"
                }
            })
    }

    /// Races `cancel()` of the attempt `cancelled` picks against the limit passing; `classify`
    /// names each round's outcome after the checks every round shares.
    func raceLimit(
        againstCancelOf cancelled: @escaping @Sendable (Round) -> Attempt<Int, TestError>, _ name: String,
        expected: Set<String>, classify: (Round) -> String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        RaceHarness.expectInterleavings(
            name, rounds: TestSize.attack.raceRounds, expected: expected, setup: Round.init,
            left: { round in
                let attempt = cancelled(round)
                attempt.cancel()
                round.expectVisible(attempt)
            },
            right: { round in round.passLimit() },
            classify: { round in
                round.checkCommon()
                return classify(round)
            }, sourceLocation: sourceLocation)
    }

    @Test func aLimitPassingAgainstCancelOfTheTimedOutAttempt() {
        raceLimit(
            againstCancelOf: \.limited, "limit against cancel of the limited attempt",
            expected: ["cancelled", "timed out"],
            classify: { round in
                #expect(round.queuedFailure.value == 0, "cancel() withdrew the queued failure callback")
                #expect(round.work.stopped.value == 1)
                #expect(round.limited.isCancelled)
                switch round.limited.peek() {
                case .failure(.cancelled):
                    #expect(round.dependent.peek() == .failure(.cancelled))
                    return "cancelled"
                case .failure(.timedOut):
                    #expect(round.limitedSaw.value == 1 && round.dependentSaw.value == 1)
                    return "timed out"
                case let other:
                    return "unexpected \(String(describing: other))"
                }
            })
    }

    @Test func aLimitPassingAgainstCancelOfTheSource() {
        raceLimit(
            againstCancelOf: { $0.work.attempt }, "limit against cancel of the source",
            expected: ["source cancelled", "timed out"],
            classify: { round in
                #expect(round.work.stopped.value == 1)
                #expect(round.work.attempt.peek() == .failure(.cancelled))
                let limited = round.limited.peek()
                #expect(round.limited.isCancelled == (limited == .failure(.cancelled)))
                #expect(round.dependent.peek() == limited)
                switch limited {
                case .failure(.cancelled):
                    return "source cancelled"
                case .failure(.timedOut):
                    // The source's cancel on the other thread may be telling the work to stop as
                    // the callbacks run: the limit then had nothing left to stop.
                    return "timed out"
                case let other:
                    return "unexpected \(String(describing: other))"
                }
            })
    }

    @Test func aLimitPassingAgainstCancelOfADependent() {
        raceLimit(
            againstCancelOf: \.dependent, "limit against cancel of a dependent",
            expected: ["dependent cancelled", "timed out"],
            classify: { round in
                #expect(round.dependent.isCancelled)
                // The limited attempt's own callback pins it: the dependent giving up leaves it
                // the work, so the limit passing stops it in either order.
                #expect(round.limited.peek() == .failure(.timedOut))
                #expect(round.work.stopped.value == 1)
                // The limited attempt's callback may run before the work stops: while the
                // dependent is pending it holds the work (the known gap above), and its release
                // on the other thread may come after the callback.
                switch round.dependent.peek() {
                case .failure(.cancelled):
                    return "dependent cancelled"
                case .failure(.timedOut):
                    #expect(round.dependentSaw.value == 1)
                    return "timed out"
                case let other:
                    return "unexpected \(String(describing: other))"
                }
            })
    }

    /// A limit and a second consumer of the source that gives up: the work is stopped exactly
    /// once, by whichever goes last, and never while the other still needs it.
    @Test func aLimitPassingAgainstTheOtherConsumerGivingUp() {
        final class SharedRound: Sendable {
            let clock = VirtualTimeExecutor()
            fileprivate let work = Work()
            let limited: Attempt<Int, TestError>
            let other: Attempt<Int, TestError>
            fileprivate let limitedSaw = Sighting()
            fileprivate let stoppedWhenOtherReturned = Sighting()

            init() {
                limited = work.attempt.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
                other = work.attempt.map(upon: .immediate) { $0 }
                limited.upon(.immediate) { [limitedSaw, work] _ in limitedSaw.record(work.stopped.value) }
            }
        }
        RaceHarness.expectInterleavings(
            "limit against the other consumer's cancel",
            rounds: TestSize.attack.raceRounds,
            expected: ["limit last", "other last"],
            setup: SharedRound.init,
            left: { round in
                round.other.cancel()
                round.stoppedWhenOtherReturned.record(round.work.stopped.value)
            },
            right: { round in round.clock.advance(by: .seconds(1)) },
            classify: { round in
                #expect(round.work.stopped.value == 1)
                #expect(round.limited.peek() == .failure(.timedOut))
                #expect(round.other.peek() == .failure(.cancelled))
                #expect(round.limitedSaw.count == 1)
                return round.limitedSaw.value == 1 ? "limit last" : "other last"
            })
    }

    /// A task awaiting `get()` on the timed-out attempt is cancelled as the limit passes: it
    /// resumes once, with the timeout or the cancellation, and the work is stopped once.
    @Test(.timeLimit(.minutes(1)))
    func aLimitPassingAgainstTheCancellationOfATaskAwaitingIt() async {
        await RaceHarness.expectInterleavings(
            "limit against a waiting task's cancellation", rounds: TestSize.attack.raceRounds,
            expected: ["timed out", "cancelled"]
        ) { size in
            let rounds = (0..<size).map { _ in Round() }
            let tasks = rounds.map { round in
                Task.immediate { () -> TestError? in
                    do {
                        _ = try await round.limited.get()
                        return nil
                    } catch {
                        return error as? TestError
                    }
                }
            }
            let pairs = zip(rounds, tasks).map { $0 }
            RaceHarness.run(pairs, left: { pair in pair.1.cancel() }, right: { pair in pair.0.passLimit() })
            var counts: [String: Int] = [:]
            for (round, task) in pairs {
                let error = await task.value
                // The limited attempt's own callbacks hold it: the task giving up cancels nothing.
                #expect(round.limited.peek() == .failure(.timedOut))
                #expect(round.work.stopped.value == 1)
                let name =
                    switch error {
                    case .timedOut?: "timed out"
                    case .cancelled?: "cancelled"
                    default: "unexpected \(String(describing: error))"
                    }
                counts[name, default: 0] += 1
            }
            return counts
        }
    }
}

/// The limit measured by a Dispatch queue (the shared timer heap), under real time.
extension StressSuites.TimeoutExpiryAttackTests {
    /// Many works with 1 ms limits on Dispatch queues, each succeeded at a random moment around its
    /// limit: each decides once, and a timed-out work is stopped before the callback that learns
    /// of it runs, on the queue's thread.
    @Test(.timeLimit(.minutes(1)))
    func dispatchLimitsRacingTheWorksResultDecideOnceAndStopFirst() {
        // ThreadSanitizer makes each spin of the pause far slower: fewer works, shorter pauses.
        let slowed = TestSize.underThreadSanitizer ? 20 : 1
        let count = TestSize.attack.raceRounds / slowed
        let queues = (0..<4).map { DispatchQueue(label: "limit \($0)") }
        let works = (0..<count).map { _ in Work() }
        let seen = (0..<count).map { _ in Sighting() }
        let succeeded = (0..<count).map { _ in Counter() }
        let limited = (0..<count).map { _ in Deferred<Attempt<Int, TestError>>() }
        let done = DispatchGroup()
        DispatchQueue.concurrentPerform(iterations: count) { index in
            let attempt = works[index].attempt.timeout(
                after: .microseconds(500), upon: queues[index % queues.count], failingWith: .timedOut)
            done.enter()
            attempt.upon(.immediate) { [work = works[index], saw = seen[index]] _ in
                saw.record(work.stopped.value)
                done.leave()
            }
            limited[index].fill(with: attempt)
            // From at once to a little over the limit, in a debug build.
            RaceHarness.pause(Int.random(in: 0..<600_000 / slowed))
            if works[index].succeed(with: index) {
                succeeded[index].increment()
            }
        }
        #expect(done.wait(timeout: .now() + 20) == .success)
        var outcomes: [String: Int] = [:]
        for index in 0..<count {
            let stopped = works[index].stopped.value
            #expect(seen[index].count == 1)
            #expect(stopped <= 1)
            // A callback added after the limit passed (under load) runs at once: it finds the
            // work cancelled, though its cancel handlers may still be running.
            #expect(seen[index].value <= stopped)
            switch limited[index].peek()?.peek() {
            case .success(index):
                #expect(succeeded[index].value == 1 && stopped == 0)
                outcomes["succeeded", default: 0] += 1
            case .failure(.timedOut):
                #expect(succeeded[index].value == 1 - stopped)
                outcomes[stopped == 1 ? "timed out, stopped" : "timed out, finished", default: 0] += 1
            case let other:
                Issue.record("unexpected \(String(describing: other))")
            }
        }
        progress("dispatch limits against succeed: \(outcomes)")
    }

    /// Whoever learns of a timeout finds the source cancelled or finished, never in between.
    ///
    /// A 300 µs limit on a Dispatch queue against the producer's `succeed` at a random moment
    /// around it. Each round's thread is its producer and its reader: it reads the limited attempt
    /// in a tight loop until its moment to succeed, so a read lands while the limit's thread is
    /// deciding; the callback added before, and one added as soon as the timeout is seen, check
    /// the same. A limit that decided first and stopped the work second failed here most rounds.
    @Test(.timeLimit(.minutes(2)))
    func whoeverSeesAnAttemptTimeOutFindsItsSourceCancelledOrFinished() {
        let count = TestSize.attack.raceRounds / (TestSize.underThreadSanitizer ? 20 : 1)
        let queue = DispatchQueue(label: "limits")
        let works = (0..<count).map { _ in Work() }
        // Per round: what the callback added first saw, what the reader saw, and what a callback
        // added once the timeout was seen saw: 1 settled, 0 not, 2 no timeout (-1 never ran).
        let early = (0..<count).map { _ in Sighting() }
        let read = (0..<count).map { _ in Sighting() }
        let late = (0..<count).map { _ in Sighting() }
        let done = DispatchGroup()
        DispatchQueue.concurrentPerform(iterations: count) { index in
            let work = works[index]
            @Sendable func settled(_ result: Result<Int, TestError>?) -> Int {
                guard result == .failure(.timedOut) else {
                    return 2
                }
                return work.attempt.isCancelled || work.attempt.peek() != nil ? 1 : 0
            }
            let attempt = work.attempt.timeout(after: .microseconds(300), upon: queue, failingWith: .timedOut)
            done.enter()
            attempt.upon(.immediate) { [saw = early[index]] result in
                saw.record(settled(result))
                done.leave()
            }
            // Reads until it succeeds, from half the limit to half past it, by the clock.
            let until = DispatchTime.now().uptimeNanoseconds + UInt64.random(in: 150_000..<450_000)
            var seen = attempt.peek()
            while seen == nil && DispatchTime.now().uptimeNanoseconds < until {
                seen = attempt.peek()
            }
            if seen != nil {
                read[index].record(settled(seen))
                done.enter()
                attempt.upon(.immediate) { [saw = late[index]] result in
                    saw.record(settled(result))
                    done.leave()
                }
            }
            _ = work.succeed(with: index)
        }
        #expect(done.wait(timeout: .now() + 60) == .success)
        for (name, sightings) in [("callback added first", early), ("reader", read), ("callback added late", late)] {
            let unsettled = sightings.count { $0.value == 0 }
            #expect(
                unsettled == 0,
                "\(unsettled) times the \(name) found a timed-out attempt's source neither cancelled nor finished")
        }
        let timedOut = early.count { $0.value == 1 }
        progress(
            "300 µs limits against succeed: \(timedOut) timed out (\(read.count { $0.value == 1 }) seen by the reader), \(count - timedOut) succeeded"
        )
    }
}
