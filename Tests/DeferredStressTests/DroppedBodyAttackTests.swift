import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

extension StressSuites {
    /// Attacks on bodies an executor drops unrun (DroppableCallback) and on timeouts kept for their
    /// limit (keptForLimit / decidersLeft / LimitBody).
    @Suite struct DroppedBodyAttackTests {
        enum Plain: Error, Equatable { case failed, timedOut }

        static let rounds = max(1, TestSize.attack.raceRounds / 4)

        /// A writer that one thread can let go of.
        final class Slot<Failure: Error>: Sendable {
            let slot: Mutex<HeldWriter<Int, Failure>?>
            let attempt: Attempt<Int, Failure>
            init() {
                let writer = HeldWriter<Int, Failure>()
                attempt = writer.attempt
                slot = Mutex(writer)
            }
            func lose() {
                let writer = slot.withLock { $0.take() }
                blackHole(writer)
            }
            func succeed(_ value: Int) {
                let writer = slot.withLock { $0 }
                writer?.succeed(with: value)
            }
        }

        /// Adds a tracked handler that counts its runs and records the result.
        static func track<S: Sendable, F: Error>(
            _ attempt: Attempt<S, F>, _ live: LiveCount, _ runs: Counter
        ) {
            let tracked = LifetimeTracked(live)
            attempt.upon(.immediate) { _ in
                _ = tracked
                runs.increment()
            }
            _ = consume tracked
        }

        // MARK: Timeouts kept for their limit

        /// A timeout the user let go of after its source was lost still times out for its consumer.
        ///
        /// The user holds the timeout while its source is lost, then lets go of it; a consumer
        /// waits. The limit can still decide the consumer, as it does when the user let go first.
        @Test(arguments: [false, true])
        func timeoutDroppedAfterItsSourceWasLostStillTimesOut(userLetsGoFirst: Bool) {
            let clock = VirtualTimeExecutor()
            let live = LiveCount()
            let runs = Counter()
            let slot = Slot<TestError>()
            var consumer: Attempt<Int, TestError>
            do {
                let limited = slot.attempt.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
                consumer = limited.map(upon: .immediate) { $0 + 1 }
                Self.track(consumer, live, runs)
                if userLetsGoFirst {
                    _ = consume limited
                    slot.lose()
                } else {
                    slot.lose()
                    _ = consume limited
                }
            }
            #expect(consumer.peek() == nil, "pending before the limit")
            clock.advance(by: .seconds(2))
            #expect(
                consumer.peek() == .failure(.timedOut),
                "userLetsGoFirst \(userLetsGoFirst): the consumer is \(String(describing: consumer.peek())), handler ran \(runs.value)"
            )
            #expect(runs.value == 1)
            #expect(live.value == 0)
            consumer = Attempt(succeededWith: 0)
        }

        /// A kept timeout releases everything once its limit fires, once the clock is released
        /// unadvanced, and once its consumers cancel.
        @Test func keptTimeoutReleasesItsConsumers() {
            for ending in ["fires", "clockReleased", "consumerCancels"] {
                let live = LiveCount()
                let runs = Counter()
                let slot = Slot<TestError>()
                var clock: VirtualTimeExecutor? = VirtualTimeExecutor()
                let consumer = slot.attempt.timeout(after: .seconds(1), upon: clock!, failingWith: .timedOut)
                    .map(upon: .immediate) { $0 + 1 }
                Self.track(consumer, live, runs)
                slot.lose()
                #expect(consumer.peek() == nil, "\(ending): kept pending for the limit")
                #expect(live.value == 1)
                switch ending {
                case "fires":
                    clock!.advance(by: .seconds(1))
                    #expect(consumer.peek() == .failure(.timedOut))
                    #expect(runs.value == 1)
                case "clockReleased":
                    clock = nil
                    #expect(consumer.peek() == nil, "orphaned once the limit is lost too")
                    #expect(runs.value == 0)
                default:
                    consumer.cancel()
                    #expect(consumer.peek() == .failure(.cancelled))
                    #expect(runs.value == 1)
                }
                #expect(live.value == 0, "\(ending): \(live.value) captures held")
                clock?.advance(by: .seconds(5))
                #expect(runs.value <= 1)
                #expect(live.value == 0)
                _ = clock
            }
        }

        /// Plain failure, no cancellation error: a consumer's cancel cannot decide the kept
        /// timeout, which is released once its limit fires or its clock goes.
        @Test func keptPlainTimeoutCancelledByConsumerIsReleasedByTheLimit() {
            for advance in [false, true] {
                let live = LiveCount()
                let runs = Counter()
                let slot = Slot<Plain>()
                var clock: VirtualTimeExecutor? = VirtualTimeExecutor()
                let consumer = slot.attempt.timeout(after: .seconds(1), upon: clock!, failingWith: .timedOut)
                    .map(upon: .immediate) { $0 + 1 }
                Self.track(consumer, live, runs)
                slot.lose()
                consumer.cancel()
                #expect(consumer.isCancelled)
                if advance {
                    clock!.advance(by: .seconds(1))
                    #expect(runs.value <= 1)
                } else {
                    clock = nil
                    #expect(runs.value == 0)
                }
                #expect(live.value == 0, "advance \(advance): \(live.value) captures held")
                _ = clock
            }
        }

        final class LimitRace: Sendable {
            let slot = Slot<TestError>()
            let clock = VirtualTimeExecutor()
            let consumer: Attempt<Int, TestError>
            let limited: Attempt<Int, TestError>?
            let live = LiveCount()
            let runs = Counter()
            init(holdTimeout: Bool) {
                let limited = slot.attempt.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
                consumer = limited.map(upon: .immediate) { $0 + 1 }
                self.limited = holdTimeout ? limited : nil
                DroppedBodyAttackTests.track(consumer, live, runs)
            }
        }

        /// The limit fires exactly as the source is lost: the consumer times out either way.
        @Test(arguments: [false, true])
        func limitFiresAsTheSourceIsLost(holdTimeout: Bool) {
            let fixtures = (0..<Self.rounds).map { _ in LimitRace(holdTimeout: holdTimeout) }
            RaceHarness.run(
                fixtures,
                left: { $0.slot.lose() },
                right: { $0.clock.advance(by: .seconds(1)) })
            var bad: [String: Int] = [:]
            for fixture in fixtures {
                let result = fixture.consumer.peek()
                if result != .failure(.timedOut) || fixture.runs.value != 1 || fixture.live.value != 0 {
                    bad[
                        "\(String(describing: result)) runs \(fixture.runs.value) live \(fixture.live.value)",
                        default: 0] += 1
                }
            }
            #expect(bad.isEmpty, "holdTimeout \(holdTimeout): \(bad)")
        }

        final class LostLimitRace: Sendable {
            let slot = Slot<TestError>()
            let thread: any OwnedThreadExecutor
            let consumer: Attempt<Int, TestError>
            let live = LiveCount()
            let runs = Counter()
            init(_ kind: OwnedThreadKind) {
                thread = kind.make(name: "dropped-body.limit")
                consumer = slot.attempt.timeout(after: .seconds(30), upon: thread, failingWith: .timedOut)
                    .map(upon: .immediate) { $0 + 1 }
                DroppedBodyAttackTests.track(consumer, live, runs)
            }
        }

        /// The limit's executor shuts down (the limit is lost: a thread executor releases its body,
        /// a loop abandons its timer) as the source is lost: the consumer is orphaned and released
        /// whatever the order.
        @Test(arguments: OwnedThreadKind.allCases) func limitLostAsTheSourceIsLost(_ kind: OwnedThreadKind) {
            let fixtures = (0..<max(1, Self.rounds / 4)).map { _ in LostLimitRace(kind) }
            RaceHarness.run(
                fixtures,
                left: { $0.slot.lose() },
                right: { _ = $0.thread.shutdown() })
            for fixture in fixtures {
                _ = fixture.thread.shutdown().wait(until: .now() + 10)
            }
            let released = holds(within: 5) { fixtures.allSatisfy { $0.live.value == 0 } }
            #expect(released, "\(fixtures.filter { $0.live.value != 0 }.count) consumers still hold their handler")
            #expect(fixtures.allSatisfy { $0.consumer.peek() == nil && $0.runs.value == 0 })
        }

        /// The limit's clock is released while the source still lives: the source still decides.
        @Test func clockReleasedWithPendingLimitsAndDelays() {
            let live = LiveCount()
            let timedRuns = Counter()
            let delayedRuns = Counter()
            let timedWriter = HeldWriter<Int, TestError>()
            let delayedWriter = HeldWriter<Int, TestError>()
            var timed: Attempt<Int, TestError>
            var delayed: Attempt<Int, TestError>
            do {
                let clock = VirtualTimeExecutor()
                timed = timedWriter.attempt.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
                    .map(upon: .immediate) { $0 + 1 }
                delayed = delayedWriter.attempt.delay(by: .seconds(1), upon: clock).map(upon: .immediate) { $0 + 1 }
                Self.track(timed, live, timedRuns)
                Self.track(delayed, live, delayedRuns)
                delayedWriter.succeed(with: 1)  // the delay's timer is now held by the clock
                _ = consume clock
            }
            #expect(delayed.peek() == nil, "a dropped delay orphans its attempt")
            #expect(delayedRuns.value == 0)
            #expect(timed.peek() == nil, "the source can still decide the timeout")
            timedWriter.succeed(with: 5)
            #expect(timed.peek() == .success(6), "timed is \(String(describing: timed.peek()))")
            #expect(timedRuns.value == 1)
            #expect(live.value == 0, "\(live.value) handlers held")
            timed = Attempt(succeededWith: 0)
            delayed = Attempt(succeededWith: 0)
        }

        // MARK: Bodies that ran

        /// andThen/fallback whose step ran and started the inner attempt, then the executor shuts
        /// down: the stage follows the inner attempt, not orphaned.
        @Test func followingStepRanThenExecutorShutDown() {
            let thread = ThreadExecutor(name: "dropped-body.following")
            let writer = HeldWriter<Int, TestError>()
            let inner = HeldWriter<Int, TestError>()
            let fallbackInner = HeldWriter<Int, TestError>()
            let started = Counter()
            let then = writer.attempt.andThen(upon: thread) { _ in
                started.increment()
                return inner.attempt
            }
            let rescued = writer.attempt.andThen(upon: .immediate) { (_: Int) -> Attempt<Int, TestError> in
                Attempt(failedWith: .failed(1))
            }
            .fallback(upon: thread) { _ in
                started.increment()
                return fallbackInner.attempt
            }
            writer.succeed(with: 1)
            #expect(holds(within: 5) { started.value == 2 })
            #expect(thread.shutdown().wait(until: .now() + 10) != nil)
            #expect(then.peek() == nil)
            inner.succeed(with: 7)
            fallbackInner.succeed(with: 8)
            #expect(then.peek() == .success(7), "andThen is \(String(describing: then.peek()))")
            #expect(rescued.peek() == .success(8), "fallback is \(String(describing: rescued.peek()))")
        }

        final class StepCancelRace: Sendable {
            let writer = HeldWriter<Int, TestError>()
            let mapped: Attempt<Int, TestError>
            let then: Attempt<Int, TestError>
            let made: Attempt<Int, TestError>
            let live = LiveCount()
            let runs = [Counter(), Counter(), Counter()]
            init(thread: ThreadExecutor) {
                mapped = writer.attempt.map(upon: thread) { $0 + 1 }
                then = writer.attempt.andThen(upon: thread) { Attempt(succeededWith: $0 + 2) }
                made = Attempt(upon: thread) { () throws(TestError) -> Int in 3 }
                for (attempt, runs) in zip([mapped, then, made], runs) {
                    DroppedBodyAttackTests.track(attempt, live, runs)
                }
            }
        }

        /// A step that runs on an executor concurrently with cancel(): decided either way,
        /// every handler runs exactly once.
        @Test func stepOnExecutorRacesCancel() {
            let thread = ThreadExecutor(name: "dropped-body.cancel")
            let fixtures = (0..<Self.rounds).map { _ in StepCancelRace(thread: thread) }
            RaceHarness.run(
                fixtures,
                left: { $0.writer.succeed(with: 1) },
                right: {
                    $0.mapped.cancel()
                    $0.then.cancel()
                    $0.made.cancel()
                })
            _ = thread.shutdown().wait(until: .now() + 10)
            let done = holds(within: 5) { fixtures.allSatisfy { $0.live.value == 0 } }
            #expect(done)
            var bad: [String: Int] = [:]
            for fixture in fixtures {
                let results = [fixture.mapped.peek(), fixture.then.peek(), fixture.made.peek()]
                let runs = fixture.runs.map(\.value)
                if results.contains(where: { $0 == nil }) || runs != [1, 1, 1] || fixture.live.value != 0 {
                    bad["\(results) runs \(runs) live \(fixture.live.value)", default: 0] += 1
                }
            }
            #expect(bad.isEmpty, "\(bad)")
        }

        // MARK: Stopping executors racing steps

        final class AttemptsBox: Sendable {
            let value = Mutex<[Attempt<Int, TestError>]>([])
            func withLock<R>(_ body: (inout [Attempt<Int, TestError>]) -> R) -> R { value.withLock { body(&$0) } }
        }

        final class StopRace: Sendable {
            let stop: @Sendable () -> Void
            let submit: @Sendable () -> Void
            let attempts = AttemptsBox()
            let live = LiveCount()
            let runs: [Counter] = (0..<7).map { _ in Counter() }
            let cancelRuns = Counter()

            init(executor: some SchedulingExecutor, stop: @escaping @Sendable () -> Void) {
                self.stop = stop
                let writer = HeldWriter<Int, TestError>()
                let inner = Attempt<Int, TestError>(succeededWith: 10)
                let liveRef = live
                let runsRef = runs
                let attemptsRef = attempts
                let cancelRef = cancelRuns
                let tracked = LifetimeTracked(live)
                writer.onCancel {
                    _ = tracked
                    cancelRef.increment()
                }
                _ = consume tracked
                submit = {
                    let made: [Attempt<Int, TestError>] = [
                        Attempt(upon: executor) { () throws(TestError) -> Int in 1 },
                        writer.attempt.map(upon: executor) { $0 + 1 },
                        writer.attempt.mapError(upon: executor) { $0 },
                        writer.attempt.andThen(upon: executor) { _ in inner },
                        writer.attempt.map(upon: .immediate) { (_: Int) throws(TestError) -> Int in throw .failed(0) }
                            .fallback(upon: executor) { _ in inner },
                        writer.attempt.delay(by: .zero, upon: executor),
                        writer.attempt.delay(by: .milliseconds(1), upon: executor),
                    ]
                    for (attempt, counter) in zip(made, runsRef) {
                        DroppedBodyAttackTests.track(attempt, liveRef, counter)
                    }
                    attemptsRef.withLock { $0 = made }
                    writer.succeed(with: 1)
                }
            }
        }

        private func checkStopRace(_ name: String, _ fixtures: [StopRace], drain: () -> Void) {
            RaceHarness.run(fixtures, left: { $0.submit() }, right: { $0.stop() })
            drain()
            let released = holds(within: 5) { fixtures.allSatisfy { $0.live.value == 0 } }
            var bad: [String: Int] = [:]
            for fixture in fixtures {
                let attempts = fixture.attempts.withLock { $0 }
                let runs = fixture.runs.map(\.value)
                for (index, attempt) in attempts.enumerated() {
                    let result = attempt.peek()
                    // Decided with a value and its handler ran once, or orphaned and released unrun.
                    if (result != nil && runs[index] != 1) || (result == nil && runs[index] != 0) || runs[index] > 1 {
                        bad["stage \(index): \(String(describing: result)) runs \(runs[index])", default: 0] += 1
                    }
                }
                if fixture.live.value != 0 {
                    bad["live \(fixture.live.value)", default: 0] += 1
                }
                if fixture.cancelRuns.value > 1 {
                    bad["onCancel ran \(fixture.cancelRuns.value)", default: 0] += 1
                }
            }
            #expect(released, "\(name): handlers still held")
            #expect(bad.isEmpty, "\(name): \(bad)")
        }

        /// Shutdown of a ThreadExecutor racing the submission of every kind of body.
        @Test func threadShutdownRacesSubmissions() {
            let threads = (0..<max(1, Self.rounds / 4)).map { _ in ThreadExecutor(name: "dropped-body.stop") }
            let fixtures = threads.map { thread in
                StopRace(executor: thread, stop: { _ = thread.shutdown() })
            }
            checkStopRace("thread", fixtures) {
                for thread in threads { _ = thread.shutdown().wait(until: .now() + 10) }
            }
        }

        /// An invalidation token racing the submission of every kind of body.
        @Test func invalidationRacesSubmissions() {
            let queue = DispatchQueue(label: "dropped-body.invalidate")
            let fixtures = (0..<Self.rounds).map { _ in
                let token = InvalidationToken()
                return StopRace(executor: token.validating(queue), stop: { token.invalidate() })
            }
            checkStopRace("token", fixtures) {
                queue.flush()
                Thread.sleep(forTimeInterval: 0.05)
                queue.flush()
            }
        }

        // MARK: Deep chains

        @Test(.skippedUnderThreadSanitizer, arguments: ["advance", "release"])
        func deepTimeoutChainOverALostWriter(ending: String) async {
            let outcome = await onDeepStack("dropped-body timeouts \(ending)", size: .attack) { () -> String in
                let live = LiveCount()
                let runs = Counter()
                var clock: VirtualTimeExecutor? = VirtualTimeExecutor()
                let slot = Slot<TestError>()
                var tail = slot.attempt
                for _ in 0..<TestSize.attack.depth {
                    tail = tail.timeout(after: .seconds(1), upon: clock!, failingWith: .timedOut)
                }
                DroppedBodyAttackTests.track(tail, live, runs)
                slot.lose()
                if ending == "advance" {
                    clock!.advance(by: .seconds(2))
                } else {
                    clock = nil
                }
                let result = tail.peek()
                tail = Attempt(succeededWith: 0)
                return "\(String(describing: result)) runs \(runs.value) live \(live.value)"
            }
            if ending == "advance" {
                #expect(
                    outcome
                        == "Optional(Swift.Result<Swift.Int, TestSupport.TestError>.failure(TestSupport.TestError.timedOut)) runs 1 live 0"
                )
            } else {
                #expect(outcome == "nil runs 0 live 0")
            }
        }

        @Test(.skippedUnderThreadSanitizer, arguments: ["lost", "stopped"])
        func deepDelayChain(ending: String) async {
            let outcome = await onDeepStack("dropped-body delays \(ending)", size: .attack) { () -> String in
                let live = LiveCount()
                let runs = Counter()
                let slot = Slot<TestError>()
                var tail = slot.attempt
                if ending == "lost" {
                    var clock: VirtualTimeExecutor? = VirtualTimeExecutor()
                    for _ in 0..<TestSize.attack.depth {
                        tail = tail.delay(by: .seconds(1), upon: clock!)
                    }
                    DroppedBodyAttackTests.track(tail, live, runs)
                    slot.lose()
                    clock = nil
                } else {
                    let clock = StoppedClock()
                    for _ in 0..<TestSize.attack.depth {
                        tail = tail.delay(by: .seconds(1), upon: clock)
                    }
                    DroppedBodyAttackTests.track(tail, live, runs)
                    slot.succeed(1)  // the first delay's timer is dropped unrun
                }
                let result = tail.peek()
                tail = Attempt(succeededWith: 0)
                return "\(String(describing: result)) runs \(runs.value) live \(live.value)"
            }
            #expect(outcome == "nil runs 0 live 0")
        }
    }
}
