import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

/// A failure type with no cancellation error: stopping cannot decide an attempt of it.
private enum PlainE: Error, Equatable {
    case failed(Int)
    case timedOut
}

/// A producer of `Failure`, whose cancel handler counts its runs.
private final class ClaimWork<Failure: Error>: Sendable {
    let writer = DeferredAttempt<Int, Failure>()
    let stopped = Counter()

    init() {
        writer.onCancel { [stopped] in stopped.increment() }
    }

    var attempt: Attempt<Int, Failure> { writer.attempt }
}

private func spin(until deadline: UInt64) {
    while DispatchTime.now().uptimeNanoseconds < deadline {}
}

extension StressSuites {
    /// Attacks on the claim-then-publish order of `TimeoutAttemptNode.expire()`: the limit claims
    /// its decision and the source's stop, publishes the timeout, then finishes the stop
    /// (a fresh eye's, against that change; it found the gaps a reader of `peek()` first saw).
    @Suite struct TimeoutClaimAttackTests {}
}

// MARK: - a. Failure types without a cancellation error

extension StressSuites.TimeoutClaimAttackTests {
    /// Guarantee (a) for a plain `enum E: Error`: once the limit passes and the producer is told
    /// to stop, does the source read as cancelled (the documented meaning of `isCancelled`:
    /// "because nothing needed it any more")? Compares with `cancel()` of the source.
    @Test(arguments: ["direct", "map"])
    func aPlainFailureSourceReadsCancelledOnceTheLimitStopsIt(shape: String) {
        let clock = VirtualTimeExecutor()
        let work = ClaimWork<PlainE>()
        let source: Attempt<Int, PlainE> = shape == "map" ? work.attempt.map(upon: .immediate) { $0 } : work.attempt
        let limited = source.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
        let saw = Sighting()
        limited.upon(.immediate) { _ in
            saw.record((source.isCancelled ? 1 : 0) + (source.peek() != nil ? 2 : 0) + work.stopped.value * 10)
        }
        clock.advance(by: .seconds(1))
        #expect(limited.peek() == .failure(.timedOut))
        #expect(work.stopped.value == 1, "the producer is told to stop once")
        #expect(saw.count == 1)
        #expect(
            saw.value % 10 != 0,
            "the callback saw the timed-out source neither cancelled nor decided (saw \(saw.value))")
        #expect(
            source.isCancelled || source.peek() != nil,
            "after the limit, the source reads neither cancelled nor decided")
        let writerCancelled = work.writer.isCancelled
        #expect(writerCancelled, "the producer, told to stop, reads isCancelled == false")
        // For comparison: cancel() of a plain attempt marks it cancelled.
        let other = ClaimWork<PlainE>()
        other.attempt.cancel()
        #expect(other.attempt.isCancelled && other.stopped.value == 1)
        // And without any limit: a plain attempt that nothing needs any more (its only consumer
        // was cancelled) is told to stop; does it read as cancelled, as `isCancelled` documents?
        let unneeded = ClaimWork<PlainE>()
        let consumer = unneeded.attempt.map(upon: .immediate) { $0 }
        consumer.cancel()
        #expect(unneeded.stopped.value == 1)
        #expect(
            unneeded.attempt.isCancelled, "a plain attempt stopped because nothing needed it reads isCancelled == false"
        )
    }

    /// A plain-failure limited attempt (pinned by a callback) cancelled while its limit passes:
    /// `cancel()` cannot decide it, so the limit still does, once; the work is told to stop once.
    ///
    /// The cancelling thread is the one telling the producer, so the callback that sees the
    /// timeout may run beside it (a known limit, the ErrorsAndCancellation guide): the count is
    /// reported.
    @Test func cancelOfAPlainLimitedAttemptRacingItsLimit() {
        final class Round: Sendable {
            let clock = VirtualTimeExecutor()
            let work = ClaimWork<PlainE>()
            let limited: Attempt<Int, PlainE>
            let saw = Sighting()
            init() {
                limited = work.attempt.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
                limited.upon(.immediate) { [saw, work] _ in saw.record(work.stopped.value) }
            }
        }
        RaceHarness.expectInterleavings(
            "plain limited cancel against its limit",
            rounds: TestSize.attack.raceRounds * 2,
            expected: [
                "timed out, callback after the stop", "timed out, callback beside the cancelling thread's stop",
            ],
            requireEvery: false,
            setup: Round.init,
            left: { round in round.limited.cancel() },
            right: { round in round.clock.advance(by: .seconds(1)) },
            classify: { round in
                #expect(round.saw.count == 1, "the callback runs once")
                #expect(round.work.stopped.value == 1, "the work is told to stop once")
                guard round.limited.peek() == .failure(.timedOut) else {
                    return "unexpected \(String(describing: round.limited.peek()))"
                }
                return round.saw.value == 0
                    ? "timed out, callback beside the cancelling thread's stop" : "timed out, callback after the stop"
            })
    }

    /// A plain-failure source's producer finishing as the limit passes: its `succeed` wins even
    /// after the stop (the stop cannot decide it); the limited attempt is decided once; onCancel
    /// at most once; a callback that sees the timeout sees the work told to stop or finished.
    @Test func aPlainSourceFinishingAsTheLimitPasses() {
        final class Round: Sendable {
            let clock = VirtualTimeExecutor()
            let work = ClaimWork<PlainE>()
            let limited: Attempt<Int, PlainE>
            let saw = Sighting()
            let succeeded = Counter()
            init() {
                limited = work.attempt.map(upon: .immediate) { $0 }
                    .timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
                limited.upon(.immediate) { [saw, work] _ in
                    saw.record(work.stopped.value + (work.attempt.peek() != nil ? 10 : 0))
                }
            }
        }
        RaceHarness.expectInterleavings(
            "plain source succeed against the limit",
            rounds: TestSize.attack.raceRounds,
            expected: ["succeeded", "timed out, stopped, finished anyway"],
            requireEvery: false,
            setup: Round.init,
            left: { round in
                if round.work.writer.succeed(with: 1) {
                    round.succeeded.increment()
                }
            },
            right: { round in round.clock.advance(by: .seconds(1)) },
            classify: { round in
                #expect(round.saw.count == 1)
                #expect(round.work.stopped.value <= 1)
                switch round.limited.peek() {
                case .success(1):
                    #expect(round.work.stopped.value == 0)
                    return "succeeded"
                case .failure(.timedOut):
                    if round.saw.value == 0 {
                        return "timed out, callback saw work neither stopped nor finished"
                    }
                    #expect(round.succeeded.value == 1, "a plain producer's succeed always decides its attempt")
                    return "timed out, stopped, finished anyway"
                case let other:
                    return "unexpected \(String(describing: other))"
                }
            })
    }
}

// MARK: - a/b. Dispatch limits, readers and late producers, around the deadline

extension StressSuites.TimeoutClaimAttackTests {
    enum Source: String, CaseIterable, Sendable {
        /// The writer's attempt itself.
        case direct
        /// A chain of maps over the writer.
        case mapChain
        /// A delay after the writer.
        case delay
        /// The limit of a limit, through a map: `w.timeout.map.timeout`.
        case stacked
    }

    enum Reader: String, CaseIterable, Sendable {
        case poller, blockedWait, lateCallback
        /// A poller that reads the source with `peek()` before `isCancelled`.
        case peekFirstPoller
    }

    /// Readers around a Dispatch deadline find the source stopped or decided.
    ///
    /// A 300 µs Dispatch limit on `source`, and the round's thread reading the limited attempt
    /// (as `reader`) until a random moment around the deadline, then the producer succeeding:
    /// whoever sees the timeout finds the limited attempt's immediate source cancelled or
    /// decided (guarantee a), and a `succeed` that returns false finds the timeout visible
    /// (guarantee b). The callback added first checks the same. Everything runs once.
    @Test(.timeLimit(.minutes(2)), arguments: Source.allCases, Reader.allCases)
    func readersAroundADispatchDeadlineFindTheSourceStopped(source: Source, reader: Reader) {
        let count = TestSize.attack.raceRounds / (TestSize.underThreadSanitizer ? 10 : 1)
        let limits = DispatchQueue(label: "claim limits", attributes: .concurrent)
        let works = (0..<count).map { _ in ClaimWork<TestError>() }
        let early = (0..<count).map { _ in Sighting() }
        let read = (0..<count).map { _ in Sighting() }
        let late = (0..<count).map { _ in Sighting() }
        let lostInvisible = Counter()
        let lost = Counter()
        let done = DispatchGroup()
        let limitedResults = NSLocked<[Int: Result<Int, TestError>?]>([:])
        DispatchQueue.concurrentPerform(iterations: count) { index in
            let work = works[index]
            let upstream: Attempt<Int, TestError>
            switch source {
            case .direct:
                upstream = work.attempt
            case .mapChain:
                var chain = work.attempt
                for _ in 0..<8 {
                    chain = chain.map(upon: .immediate) { $0 + 1 }
                }
                upstream = chain
            case .delay:
                upstream = work.attempt.delay(by: .microseconds(50), upon: limits)
            case .stacked:
                upstream = work.attempt.timeout(after: .microseconds(300), upon: limits, failingWith: .failed(1))
                    .map(upon: .immediate) { $0 }
            }
            @Sendable func settled(_ result: Result<Int, TestError>?) -> Int {
                guard case .failure(let error)? = result, error == .timedOut || error == .failed(1) else {
                    return 2
                }
                if reader == .peekFirstPoller {
                    return upstream.peek() != nil || upstream.isCancelled ? 1 : 0
                }
                return upstream.isCancelled || upstream.peek() != nil ? 1 : 0
            }
            let limited = upstream.timeout(after: .microseconds(300), upon: limits, failingWith: .timedOut)
            done.enter()
            limited.upon(.immediate) { [saw = early[index]] result in
                saw.record(settled(result))
                done.leave()
            }
            let until = DispatchTime.now().uptimeNanoseconds + UInt64.random(in: 150_000..<450_000)
            var seen: Result<Int, TestError>?
            switch reader {
            case .poller, .lateCallback, .peekFirstPoller:
                seen = limited.peek()
                while seen == nil && DispatchTime.now().uptimeNanoseconds < until {
                    seen = limited.peek()
                }
            case .blockedWait:
                if Bool.random() {
                    // Saturating: a slow round (under a sanitizer) may be past `until` already.
                    let now = DispatchTime.now().uptimeNanoseconds
                    seen = limited.wait(until: .now() + .nanoseconds(Int(until > now ? until - now : 0)))
                } else {
                    seen = limited.wait(until: .now() + 5)
                }
            }
            if seen != nil {
                read[index].record(settled(seen))
                if reader == .lateCallback {
                    done.enter()
                    limited.upon(.immediate) { [saw = late[index]] result in
                        saw.record(settled(result))
                        done.leave()
                    }
                }
            }
            spin(until: until)
            if !work.writer.succeed(with: index) {
                lost.increment()
                if limited.peek() == nil {
                    // Only meaningful for `direct`: elsewhere the stop of the writer follows the
                    // limit's publication anyway, or comes from a stacked limit.
                    lostInvisible.increment()
                }
            }
            limitedResults.withLock { $0[index] = limited.peek() }
        }
        #expect(done.wait(timeout: .now() + 60) == .success, "a callback never ran")
        for (name, sightings) in [("callback added first", early), ("reader", read), ("callback added late", late)] {
            let unsettled = sightings.count { $0.value == 0 }
            #expect(
                unsettled == 0,
                "\(unsettled) times the \(name) found a timed-out attempt's source neither cancelled nor decided")
            #expect(sightings.allSatisfy { $0.count <= 1 }, "a callback ran twice")
        }
        #expect(early.allSatisfy { $0.count == 1 })
        #expect(works.allSatisfy { $0.stopped.value <= 1 }, "onCancel ran twice")
        if source == .direct || source == .mapChain {
            #expect(
                lostInvisible.value == 0,
                "\(lostInvisible.value) losing succeeds returned before the timeout was visible")
        }
        let timedOut = early.count { $0.value == 1 }
        progress(
            "claim \(source)/\(reader): \(timedOut) timed out, \(read.count { $0.value == 1 }) seen timed out by reader, \(lost.value) late succeeds lost, \(count - timedOut) succeeded"
        )
    }

    /// An awaiting task on the limited attempt resumes with the timeout only once the source is
    /// cancelled or decided; the producer succeeds at a random moment around the deadline.
    @Test(.timeLimit(.minutes(2)))
    func awaitingTasksAroundADispatchDeadlineFindTheSourceStopped() async {
        let count = TestSize.attack.raceRounds / (TestSize.underThreadSanitizer ? 10 : 2)
        let limits = DispatchQueue(label: "claim await limits", attributes: .concurrent)
        let bad = Counter()
        let timedOut = Counter()
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<count {
                let work = ClaimWork<TestError>()
                let upstream = work.attempt.map(upon: .immediate) { $0 }
                let limited = upstream.timeout(after: .microseconds(300), upon: limits, failingWith: .timedOut)
                group.addTask {
                    do {
                        _ = try await limited.get()
                    } catch {
                        if (error as? TestError) == .timedOut {
                            timedOut.increment()
                            if !(upstream.isCancelled || upstream.peek() != nil) {
                                bad.increment()
                            }
                        }
                    }
                }
                let deadline = DispatchTime.now().uptimeNanoseconds + UInt64.random(in: 200_000..<400_000)
                DispatchQueue.global().async {
                    spin(until: deadline)
                    _ = work.writer.succeed(with: index)
                }
                if index % 16 == 15 {
                    await group.waitForAll()
                }
            }
        }
        #expect(
            bad.value == 0, "\(bad.value) awaiting tasks saw the timeout with the source neither cancelled nor decided")
        progress("claim awaiting tasks: \(timedOut.value) of \(count) timed out")
    }
}

// MARK: - c. Exactly once and re-entrancy on the expiring thread, with nested limits

extension StressSuites.TimeoutClaimAttackTests {
    enum Reentry: String, CaseIterable, Sendable {
        case waitOuter, waitInner, waitMid, cancelOuter, cancelInner, cancelSource, peekAll
        case uponOuter, newTimeoutOnOuter, succeedSource
    }

    /// Re-entrant calls from nested limits expiring neither hang nor run anything twice.
    ///
    /// `work → timeout(1s) → map → timeout(1s)`, both limits passing together (or only the
    /// outer): the producer's onCancel handler and the outer callback make re-entrant calls on
    /// the expiring thread. Nothing hangs (the blocking waits have a 5 s deadline, so a
    /// deadlock shows as a nil wait), each callback runs once, onCancel at most once.
    @Test(.timeLimit(.minutes(1)), arguments: Reentry.allCases, ["both", "outerOnly"])
    func reentrantCallsFromNestedLimitsExpiring(reentry: Reentry, which: String) {
        let clock = VirtualTimeExecutor()
        let work = ClaimWork<TestError>()
        let inner = work.attempt.timeout(after: .seconds(which == "both" ? 1 : 5), upon: clock, failingWith: .failed(1))
        let mid = inner.map(upon: .immediate) { $0 }
        let outer = mid.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
        let extra = Counter()
        let reentered = Counter()
        let stale = Counter()
        let body: @Sendable (String) -> Void = { place in
            reentered.increment()
            switch reentry {
            case .waitOuter:
                if outer.wait(until: .now() + 5) == nil { stale.increment() }
            case .waitInner:
                if inner.wait(until: .now() + 5) == nil { stale.increment() }
            case .waitMid:
                if mid.wait(until: .now() + 5) == nil { stale.increment() }
            case .cancelOuter:
                outer.cancel()
                if outer.peek() == nil { stale.increment() }
            case .cancelInner:
                inner.cancel()
                if inner.peek() == nil { stale.increment() }
            case .cancelSource:
                work.attempt.cancel()
                if work.attempt.peek() == nil { stale.increment() }
            case .peekAll:
                if outer.peek() == nil { stale.increment() }
                if !(mid.isCancelled || mid.peek() != nil) { stale.increment() }
            case .uponOuter:
                outer.upon(.immediate) { _ in extra.increment() }
                mid.upon(.immediate) { _ in extra.increment() }
            case .newTimeoutOnOuter:
                let again = outer.timeout(after: .seconds(1), upon: clock, failingWith: .failed(9))
                if again.peek() == nil { stale.increment() }
            case .succeedSource:
                if work.writer.succeed(with: 7) { stale.increment() }
            }
            _ = place
        }
        let selfWaits: Set<Reentry> = [.waitOuter, .waitMid, .peekAll, .newTimeoutOnOuter]
        let fromOnCancel = which == "outerOnly" || !selfWaits.contains(reentry)
        if fromOnCancel {
            work.writer.onCancel { body("onCancel") }
        }
        let outerSaw = Sighting()
        outer.upon(.immediate) { _ in
            outerSaw.record(work.stopped.value)
            body("callback")
        }
        clock.advance(by: .seconds(1))
        clock.advance(by: .seconds(5))
        let outerResult = outer.peek()
        #expect(
            outerResult == .failure(.timedOut) || outerResult == .failure(.failed(1))
                || ([.cancelOuter, .cancelInner].contains(reentry) && outerResult == .failure(.cancelled)),
            "outer: \(String(describing: outerResult))")
        #expect(outerSaw.count == 1, "the outer callback runs once")
        #expect(work.stopped.value == 1, "the producer is told to stop exactly once")
        #expect(outerSaw.value == 1, "the outer callback saw the work stopped")
        #expect(stale.value == 0, "a re-entrant read found a result missing, or a wait timed out")
        #expect(reentered.value == (fromOnCancel ? 2 : 1))
        if reentry == .uponOuter {
            #expect(extra.value == (fromOnCancel ? 4 : 2))
        }
        #expect(work.attempt.peek() == .failure(.cancelled))
        #expect(mid.isCancelled || mid.peek() != nil)
    }

    /// A callback that reads the source with `peek()` first finds it cancelled or decided.
    ///
    /// The producer's `succeed` claiming the source as the limit passes: the limit wins its own
    /// claim, finds the source decided (claimed, maybe not yet published) and skips the stop.
    /// A callback of the timed-out attempt that reads the source with `peek()` first, then
    /// `isCancelled`, should find it cancelled or decided (guarantee a).
    @Test func aCallbackReadingPeekFirstAgainstTheProducersClaim() {
        final class Round: Sendable {
            let clock = VirtualTimeExecutor()
            let work = ClaimWork<TestError>()
            let limited: Attempt<Int, TestError>
            let saw = Sighting()
            init() {
                limited = work.attempt.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
                limited.upon(.immediate) { [saw, work] _ in
                    let peeked = work.attempt.peek() != nil
                    let cancelled = work.attempt.isCancelled
                    saw.record((peeked ? 1 : 0) + (cancelled ? 2 : 0) + (work.attempt.peek() != nil ? 4 : 0))
                }
            }
        }
        RaceHarness.expectInterleavings(
            "peek-first reader against the producer's claim",
            rounds: TestSize.attack.raceRounds * 2,
            expected: ["succeeded", "timed out, work stopped", "timed out, work finished"],
            requireEvery: false,
            setup: Round.init,
            left: { round in _ = round.work.writer.succeed(with: 1) },
            right: { round in round.clock.advance(by: .seconds(1)) },
            classify: { round in
                #expect(round.saw.count == 1)
                switch round.limited.peek() {
                case .success:
                    return "succeeded"
                case .failure(.timedOut):
                    if round.saw.value & 3 == 0 {
                        return
                            "timed out, callback found the source neither cancelled nor decided (later decided: \(round.saw.value & 4 != 0))"
                    }
                    return round.work.stopped.value == 1 ? "timed out, work stopped" : "timed out, work finished"
                case let other:
                    return "unexpected \(String(describing: other))"
                }
            })
    }

    /// Two Dispatch limits stacked through a map, and a third on top, all 300 µs on a concurrent
    /// queue so they fire together on different threads: the producer is told to stop once,
    /// nothing hangs, the outermost callback sees its source stopped, every level decided once.
    @Test(.timeLimit(.minutes(2)))
    func stackedDispatchLimitsFiringTogetherDecideOnceWithoutDeadlock() {
        let count = TestSize.attack.raceRounds / (TestSize.underThreadSanitizer ? 10 : 1)
        let limits = DispatchQueue(label: "stacked", attributes: .concurrent)
        let works = (0..<count).map { _ in ClaimWork<TestError>() }
        let saw = (0..<count).map { _ in Sighting() }
        let done = DispatchGroup()
        let outcomes = NSLocked<[String: Int]>([:])
        DispatchQueue.concurrentPerform(iterations: count) { index in
            let work = works[index]
            let a = work.attempt.timeout(after: .microseconds(300), upon: limits, failingWith: .failed(1))
            let b = a.map(upon: .immediate) { $0 }.timeout(
                after: .microseconds(300), upon: limits, failingWith: .failed(2))
            let mid = b.map(upon: .immediate) { $0 }
            let c = mid.timeout(after: .microseconds(300), upon: limits, failingWith: .failed(3))
            done.enter()
            c.upon(.immediate) { result in
                let ok = mid.isCancelled || mid.peek() != nil || result.successValue != nil
                saw[index].record(ok ? 1 : 0)
                let name: String
                switch result {
                case .success: name = "succeeded"
                case .failure(let error): name = "\(error)"
                }
                outcomes.withLock { $0[name, default: 0] += 1 }
                done.leave()
            }
            spin(until: DispatchTime.now().uptimeNanoseconds + UInt64.random(in: 200_000..<400_000))
            _ = work.writer.succeed(with: index)
        }
        #expect(done.wait(timeout: .now() + 60) == .success, "a stacked limit never decided its attempt")
        #expect(saw.allSatisfy { $0.count == 1 }, "an outer callback ran other than once")
        #expect(saw.allSatisfy { $0.value != 0 }, "the outer callback found its source neither cancelled nor decided")
        #expect(works.allSatisfy { $0.stopped.value <= 1 })
        // Once every limit passed, every producer that did not succeed was told to stop.
        Thread.sleep(forTimeInterval: 0.05)
        #expect(works.allSatisfy { $0.stopped.value == 1 || $0.attempt.peek()?.successValue != nil })
        progress("stacked dispatch limits: \(outcomes.withLock { $0 })")
    }
}

// MARK: - c. andThen and delay as the source, racing the limit

extension StressSuites.TimeoutClaimAttackTests {
    /// An `andThen` moving to its next stage against the limit stops the stage it holds.
    ///
    /// `first.andThen { second }.timeout`: the first stage finishing (installing the second)
    /// against the limit passing. Whichever wins: the second producer is told to stop at most
    /// once, the first never (it finished), and the timeout's callback sees the andThen stopped.
    @Test func anAndThenMovingToItsNextStageAgainstTheLimit() {
        final class Round: Sendable {
            let clock = VirtualTimeExecutor()
            let first = ClaimWork<TestError>()
            let second = ClaimWork<TestError>()
            let chained: Attempt<Int, TestError>
            let limited: Attempt<Int, TestError>
            let saw = Sighting()
            let steps = Counter()
            init() {
                chained = first.attempt.andThen(upon: .immediate) { [second, steps] _ in
                    steps.increment()
                    return second.attempt
                }
                limited = chained.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
                limited.upon(.immediate) { [saw, chained] _ in
                    saw.record(chained.isCancelled || chained.peek() != nil ? 1 : 0)
                }
            }
        }
        RaceHarness.expectInterleavings(
            "andThen step against the limit",
            rounds: TestSize.attack.raceRounds,
            expected: ["timed out before the step", "timed out after the step"],
            requireEvery: false,
            setup: Round.init,
            left: { round in _ = round.first.writer.succeed(with: 1) },
            right: { round in round.clock.advance(by: .seconds(1)) },
            classify: { round in
                #expect(round.saw.count == 1 && round.saw.value == 1, "the callback saw the andThen stopped")
                #expect(round.limited.peek() == .failure(.timedOut))
                #expect(round.chained.peek() == .failure(.cancelled))
                #expect(round.first.stopped.value <= 1)
                #expect(round.steps.value <= 1)
                if round.steps.value == 1 {
                    #expect(round.first.stopped.value == 0, "the finished first stage is not cancelled")
                    #expect(round.second.stopped.value == 1, "the second stage is told to stop once")
                    return "timed out after the step"
                }
                #expect(round.second.stopped.value == 0)
                return "timed out before the step"
            })
    }
}

// MARK: - d. Deep chains

extension StressSuites.TimeoutClaimAttackTests {
    /// A limit whose source is a map chain as deep as the run's depth: the limit passing stops
    /// the whole chain, once, without overflowing a small stack; the callback sees the chain's
    /// tail stopped; for a plain failure type, the producer is still told to stop.
    @Test(.skippedUnderThreadSanitizer, arguments: ["cancellable", "plain"])
    func aLimitOverADeepMapChainStopsTheWholeChain(failure: String) async {
        let depth = TestSize.attack.depth
        let outcome = await onDeepStack("limit over a deep map chain", size: .attack) { () -> [Int] in
            let clock = VirtualTimeExecutor()
            if failure == "plain" {
                let work = ClaimWork<PlainE>()
                var chain = work.attempt
                for _ in 0..<depth {
                    chain = chain.map(upon: .immediate) { $0 + 1 }
                }
                let limited = chain.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
                let saw = Sighting()
                limited.upon(.immediate) { _ in saw.record(work.stopped.value) }
                clock.advance(by: .seconds(1))
                let late = work.writer.succeed(with: 1) ? 1 : 0
                return [limited.peek() == .failure(.timedOut) ? 1 : 0, work.stopped.value, saw.count, saw.value, late]
            }
            let work = ClaimWork<TestError>()
            var chain = work.attempt
            for _ in 0..<depth {
                chain = chain.map(upon: .immediate) { $0 + 1 }
            }
            let limited = chain.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
            let saw = Sighting()
            limited.upon(.immediate) { [chain] _ in
                saw.record(work.stopped.value * 10 + (chain.peek() == .failure(.cancelled) ? 1 : 0))
            }
            clock.advance(by: .seconds(1))
            let late = work.writer.succeed(with: 1) ? 1 : 0
            return [
                limited.peek() == .failure(.timedOut) ? 1 : 0, work.stopped.value, saw.count, saw.value,
                work.attempt.peek() == .failure(.cancelled) ? 0 : 1 + late,
            ]
        }
        if failure == "plain" {
            // Late succeed of a plain producer may still win (stopping cannot decide it).
            #expect(Array(outcome.prefix(4)) == [1, 1, 1, 1])
        } else {
            #expect(outcome == [1, 1, 1, 11, 0])
        }
    }

    /// Limits stacked `a.timeout.map.timeout.map…` as deep as a tenth of the run's depth, all
    /// passing at once against the producer finishing from another thread.
    @Test(.skippedUnderThreadSanitizer, .timeLimit(.minutes(2)))
    func deepStackedLimitsPassingAgainstTheProducer() async {
        let depth = TestSize.attack.depth / 10
        let outcome = await onDeepStack("stacked limits against the producer", size: .attack) { () -> [Int] in
            var bad = 0
            for round in 0..<20 {
                let clock = VirtualTimeExecutor()
                let work = ClaimWork<TestError>()
                var chain = work.attempt
                for level in 0..<depth {
                    chain = chain.timeout(after: .seconds(1), upon: clock, failingWith: .failed(level))
                        .map(upon: .immediate) { $0 }
                }
                let saw = Sighting()
                chain.upon(.immediate) { _ in saw.record(work.stopped.value) }
                let go = DispatchSemaphore(value: 0)
                let finished = DispatchSemaphore(value: 0)
                let lostInvisible = Counter()
                let tail = chain
                Thread {
                    go.wait()
                    RaceHarness.pause(round * 37)
                    if !work.writer.succeed(with: 1) && tail.peek() == nil {
                        // The innermost limit stops the writer; the tail is decided by links
                        // after it, so this only records, it does not fail.
                        lostInvisible.increment()
                    }
                    finished.signal()
                }.start()
                go.signal()
                clock.advance(by: .seconds(1))
                finished.wait()
                if saw.count != 1 || work.stopped.value > 1 || chain.peek() == nil {
                    bad += 1
                }
            }
            return [bad]
        }
        #expect(outcome == [0])
    }
}

// MARK: - e. Memory

extension StressSuites.TimeoutClaimAttackTests {
    /// Weak references to the limited attempt, its source chain and the producer's writer become
    /// nil once the limit passed and the caller dropped them, for virtual and Dispatch limits,
    /// with re-entrant callbacks capturing the limited attempt.
    @Test(.timeLimit(.minutes(1)), arguments: ["virtual", "dispatch"], ["direct", "map", "stacked", "plain"])
    func nothingIsKeptOnceTheLimitPassed(clockKind: String, shape: String) {
        let clock = VirtualTimeExecutor()
        let queue = DispatchQueue(label: "claim memory")
        let ran = Counter()
        weak var weakLimited: AnyObject?
        weak var weakWriter: LifetimeTrackedBox?
        weak var weakSourceTracked: LifetimeTrackedBox?
        let group = DispatchGroup()
        do {
            let tracked = LifetimeTrackedBox()
            weakSourceTracked = tracked
            let limit: Duration = clockKind == "virtual" ? .seconds(1) : .milliseconds(2)
            if shape == "plain" {
                let writer = DeferredAttempt<Int, PlainE>()
                let handlerCapture = LifetimeTrackedBox()
                weakWriter = handlerCapture
                writer.onCancel { [handlerCapture] in _ = handlerCapture.id }
                let source = writer.attempt.map(upon: .immediate) { [tracked] in $0 + tracked.id }
                let limited: Attempt<Int, PlainE> =
                    clockKind == "virtual"
                    ? source.timeout(after: limit, upon: clock, failingWith: .timedOut)
                    : source.timeout(after: limit, upon: queue, failingWith: .timedOut)
                let box = LimitedBox(limited)
                weakLimited = box
                group.enter()
                limited.upon(.immediate) { [box] _ in
                    _ = box.attempt.peek()
                    ran.increment()
                    group.leave()
                }
                writer.onCancel { [box] in _ = box.attempt.isCancelled }
            } else {
                let writer = DeferredAttempt<Int, TestError>()
                let handlerCapture = LifetimeTrackedBox()
                weakWriter = handlerCapture
                writer.onCancel { [handlerCapture] in _ = handlerCapture.id }
                var source = writer.attempt
                if shape != "direct" {
                    source = source.map(upon: .immediate) { [tracked] in $0 + tracked.id }
                }
                if shape == "stacked" {
                    source = source.timeout(after: limit, upon: clock, failingWith: .failed(1))
                        .map(upon: .immediate) { $0 }
                }
                let limited: Attempt<Int, TestError> =
                    clockKind == "virtual"
                    ? source.timeout(after: limit, upon: clock, failingWith: .timedOut)
                    : source.timeout(after: limit, upon: queue, failingWith: .timedOut)
                let box = LimitedBox(limited)
                weakLimited = box
                group.enter()
                limited.upon(.immediate) { [box] _ in
                    _ = box.attempt.wait(until: .now() + 1)
                    ran.increment()
                    group.leave()
                }
                writer.onCancel { [box] in _ = box.attempt.peek() }
            }
        }
        if clockKind == "virtual" {
            clock.advance(by: .seconds(1))
        }
        #expect(group.wait(timeout: .now() + 10) == .success)
        // Let the Dispatch timer's thread let go of what it held.
        for _ in 0..<200 where weakLimited != nil || weakWriter != nil || weakSourceTracked != nil {
            Thread.sleep(forTimeInterval: 0.005)
        }
        #expect(ran.value == 1)
        #expect(weakLimited == nil, "the limited attempt is kept")
        #expect(weakWriter == nil, "the producer's cancel handler (or the writer) is kept")
        #expect(weakSourceTracked == nil, "the source chain's capture is kept")
    }
}

private final class LifetimeTrackedBox: Sendable {
    let id = 0
}

private final class LimitedBox<Failure: Error>: Sendable {
    let attempt: Attempt<Int, Failure>
    init(_ attempt: Attempt<Int, Failure>) {
        self.attempt = attempt
    }
}
