import Deferred
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

extension StressSuites {
    /// Attacks on orphaning: a pending attempt whose only deciders are gone finishes without a value.
    @Suite struct OrphaningAttackTests {
        /// A failure type that cannot say "abandoned" and has no cancellation error.
        enum Plain: Error, Equatable { case failed }

        static let rounds = TestSize.attack.raceRounds / 2

        /// A writer in a slot, so that one thread can be the one that lets it go; its producer's
        /// cancel handler is tracked and counted.
        final class Slot<Failure: Error>: Sendable {
            let slot: Mutex<HeldWriter<Int, Failure>?>
            let attempt: Attempt<Int, Failure>
            let cancelRuns = Counter()
            let live: LiveCount

            init(live: LiveCount = LiveCount()) {
                self.live = live
                let writer = HeldWriter<Int, Failure>()
                let tracked = LifetimeTracked(live)
                writer.onCancel { [cancelRuns] in
                    _ = tracked
                    cancelRuns.increment()
                }
                _ = consume tracked
                attempt = writer.attempt
                slot = Mutex(writer)
            }

            /// Releases the writer: the last reference goes on this thread.
            func lose() {
                let writer = slot.withLock { $0.take() }
                blackHole(writer)
            }

            /// The writer, if not lost yet.
            var writer: HeldWriter<Int, Failure>? { slot.withLock { $0 } }
        }

        /// Adds a tracked handler to `attempt` that counts its runs.
        static func track<S: Sendable, F: Error>(_ attempt: Attempt<S, F>, _ live: LiveCount, _ runs: Counter) {
            let tracked = LifetimeTracked(live)
            attempt.upon(.immediate) { _ in
                _ = tracked
                runs.increment()
            }
            _ = consume tracked
        }

        // MARK: Races: writer release against another thread

        final class CancelFixture<Failure: Error>: Sendable {
            let slot: Slot<Failure>
            let derived: Attempt<Int, Failure>
            let runs = Counter()
            let cancelTarget: Bool
            init(cancelDerived: Bool) {
                slot = Slot()
                derived = slot.attempt.map(upon: .immediate) { $0 + 1 }
                cancelTarget = cancelDerived
                OrphaningAttackTests.track(derived, slot.live, runs)
            }
        }

        @Test(arguments: [false, true])
        func writerReleaseRacesCancel(cancelDerived: Bool) {
            checkCancelRace(TestError.self, cancelDerived: cancelDerived, cancelled: .cancelled)
            checkCancelRace(Plain.self, cancelDerived: cancelDerived, cancelled: nil)
        }

        private func checkCancelRace<Failure: Error & Equatable>(
            _: Failure.Type, cancelDerived: Bool, cancelled: Failure?
        ) {
            let fixtures = (0..<Self.rounds).map { _ in CancelFixture<Failure>(cancelDerived: cancelDerived) }
            let finished = returnsOnAThread(within: 30) {
                RaceHarness.run(
                    fixtures,
                    left: { $0.slot.lose() },
                    right: { ($0.cancelTarget ? $0.derived : $0.slot.attempt).cancel() })
            }
            #expect(finished, "a cancel racing the writer's release returned")
            guard finished else { return }
            var counts: [String: Int] = [:]
            for fixture in fixtures {
                let root = fixture.slot.attempt.peek()
                let tail = fixture.derived.peek()
                counts[
                    "root \(root.map { "\($0)" } ?? "nil"), tail \(tail.map { "\($0)" } ?? "nil"), onCancel \(fixture.slot.cancelRuns.value)",
                    default: 0] += 1
                #expect(fixture.slot.live.value == 0, "\(Failure.self): handlers and cancel handlers released")
                #expect(fixture.runs.value <= 1)
                #expect(fixture.slot.cancelRuns.value <= 1)
                let target = fixture.cancelTarget ? fixture.derived : fixture.slot.attempt
                #expect(target.isCancelled, "cancel() says so")
                if let cancelled {
                    #expect(root == nil || root == .failure(cancelled))
                    #expect(tail == nil || tail == .failure(cancelled))
                    // A producer that was told to stop saw its attempt decided as cancelled.
                    if fixture.slot.cancelRuns.value == 1 {
                        #expect(root == .failure(cancelled), "onCancel ran but root is \(String(describing: root))")
                    }
                } else {
                    #expect(root == nil && tail == nil)
                }
                // A handler runs iff the tail has a result.
                #expect(fixture.runs.value == (tail == nil ? 0 : 1))
            }
            progress("cancel race \(Failure.self) derived=\(cancelDerived): \(counts)")
        }

        final class ReaderFixture: Sendable {
            let slot = Slot<TestError>()
            let derived: Attempt<Int, TestError>
            let runs = Counter()
            let waited = Mutex<Result<Int, TestError>??>(nil)
            init() {
                derived = slot.attempt.map(upon: .immediate) { $0 + 1 }
            }
        }

        @Test func writerReleaseRacesUponWaitPeekAndNewStages() {
            let fixtures = (0..<Self.rounds).map { _ in ReaderFixture() }
            let finished = returnsOnAThread(within: 60) {
                RaceHarness.run(
                    fixtures,
                    left: { $0.slot.lose() },
                    right: { fixture in
                        let live = fixture.slot.live
                        OrphaningAttackTests.track(fixture.slot.attempt, live, fixture.runs)
                        OrphaningAttackTests.track(fixture.derived, live, fixture.runs)
                        let stages: [Attempt<Int, TestError>] = [
                            fixture.slot.attempt.map(upon: .immediate) { $0 },
                            fixture.derived.andThen(upon: .immediate) { Attempt(succeededWith: $0) },
                            fixture.derived.fallback(upon: .immediate) { Attempt(failedWith: $0) },
                            [fixture.slot.attempt, Attempt(succeededWith: 1)].allSucceeded().map(upon: .immediate) {
                                $0[0]
                            },
                            [fixture.slot.attempt, Attempt(failedWith: .failed(1))].firstSucceeded(),
                            OrphaningAttackTests.second(of: fixture.derived.and(Attempt(succeededWith: 2))),
                        ]
                        for stage in stages {
                            OrphaningAttackTests.track(stage, live, fixture.runs)
                        }
                        let result = fixture.derived.wait(until: .now() + .microseconds(50))
                        fixture.waited.withLock { $0 = .some(result) }
                        _ = fixture.slot.attempt.peek()
                    })
            }
            #expect(finished, "upon/wait/new stages racing the writer's release returned")
            guard finished else { return }
            for fixture in fixtures {
                #expect(fixture.runs.value == 0, "a handler ran on an orphaned attempt")
                #expect(fixture.slot.live.value == 0, "handlers released")
                #expect(fixture.slot.cancelRuns.value == 0)
                #expect(fixture.waited.withLock { $0 } == .some(nil))
                #expect(fixture.slot.attempt.peek() == nil && fixture.derived.peek() == nil)
            }
        }

        static func second<F: Error>(of pair: Attempt<(Int, Int), F>) -> Attempt<Int, F> {
            pair.map(upon: .immediate) { (_: Int, second: Int) in second }
        }

        /// Many threads add handlers (enough to overflow into chunks) while the writer goes.
        @Test func writerReleaseRacesManyRegistrants() {
            for _ in 0..<200 {
                let slot = Slot<TestError>()
                let runs = Counter()
                for _ in 0..<40 {
                    Self.track(slot.attempt, slot.live, runs)
                }
                DispatchQueue.concurrentPerform(iterations: 4) { index in
                    if index == 0 {
                        RaceHarness.pause(Int.random(in: 0..<200))
                        slot.lose()
                    } else {
                        for _ in 0..<60 {
                            Self.track(slot.attempt, slot.live, runs)
                            Self.track(slot.attempt.map(upon: .immediate) { $0 }, slot.live, runs)
                        }
                    }
                }
                #expect(runs.value == 0)
                #expect(slot.live.value == 0, "\(slot.live.value) handlers still held")
            }
        }

        // MARK: Blocking waits and tasks

        @Test func aWaitWithADeadlineOnAnAttemptOrphanedDuringTheWaitTimesOut() {
            for _ in 0..<50 {
                let slot = Slot<TestError>()
                let derived = slot.attempt.map(upon: .immediate) { $0 }
                let result = Mutex<Result<Int, TestError>??>(nil)
                let started = ContinuousClock.now
                let finished = returnsOnAThread(within: 10) {
                    let waited = derived.wait(until: .now() + .milliseconds(20))
                    result.withLock { $0 = .some(waited) }
                }
                _ = returnsOnAThread(within: 5) {
                    RaceHarness.pause(Int.random(in: 0..<20_000))
                    slot.lose()
                }
                #expect(finished)
                #expect(ContinuousClock.now - started < .seconds(5))
                #expect(result.withLock { $0 } == .some(nil))
                #expect(slot.live.value == 0)
            }
        }

        @Test(arguments: [false, true])
        func aTaskInGetWhenTheAttemptIsOrphanedThrowsOnceCancelled(derived: Bool) async {
            for round in 0..<200 {
                let slot = Slot<TestError>()
                let target = derived ? slot.attempt.map(upon: .immediate) { $0 } : slot.attempt
                let task = Task { try await target.get() }
                if round % 2 == 0 { await Task.yield() }
                // Lost on another thread, awaited as a task: a continuation resumed from a
                // Foundation `Thread` here made ThreadSanitizer report the task allocator's reuse
                // of the awaiting frame as a race (the runtime's slabs are not instrumented).
                await Task.detached { slot.lose() }.value
                task.cancel()
                let outcome = await Self.withTimeout(seconds: 10) { await task.result }
                switch outcome {
                case nil:
                    Issue.record("get() of a cancelled task never returned (round \(round))")
                    return
                case .some(.success(let value)):
                    Issue.record("get() returned \(value)")
                case .some(.failure(let error)):
                    #expect(error as? TestError == .cancelled)
                }
                #expect(slot.live.value == 0, "round \(round)")
                #expect(slot.cancelRuns.value == 0, "round \(round): orphaned, not cancelled")
            }
        }

        static func withTimeout<T: Sendable>(seconds: Double, _ body: @escaping @Sendable () async -> T) async -> T? {
            let box = Deferred<T?>()
            Task { box.fill(with: await body()) }
            Thread {
                Thread.sleep(forTimeInterval: seconds)
                box.fill(with: nil)
            }.start()
            return await box.value
        }

        // MARK: Joins

        final class JoinFixture: Sendable {
            let orphaned = Slot<TestError>()
            let other = HeldWriter<Int, TestError>()
            let joined: Attempt<Int, TestError>
            let runs = Counter()
            let live = LiveCount()
            let kind: String
            let otherSucceeds: Bool
            init(kind: String, otherSucceeds: Bool) {
                self.kind = kind
                self.otherSucceeds = otherSucceeds
                switch kind {
                case "allSucceeded":
                    joined = [orphaned.attempt, other.attempt].allSucceeded().map(upon: .immediate) { $0[1] }
                case "and":
                    joined = OrphaningAttackTests.second(of: orphaned.attempt.and(other.attempt))
                default:
                    joined = [orphaned.attempt, other.attempt].firstSucceeded()
                }
                OrphaningAttackTests.track(joined, live, runs)
            }
        }

        @Test(arguments: ["allSucceeded", "and", "firstSucceeded"], [true, false])
        func writerReleaseRacesTheOtherInputOfAJoin(kind: String, otherSucceeds: Bool) {
            let fixtures = (0..<Self.rounds).map { _ in JoinFixture(kind: kind, otherSucceeds: otherSucceeds) }
            let finished = returnsOnAThread(within: 30) {
                RaceHarness.run(
                    fixtures,
                    left: { $0.orphaned.lose() },
                    right: { fixture in
                        if fixture.otherSucceeds {
                            fixture.other.succeed(with: 7)
                        } else {
                            fixture.other.fail(with: .failed(1))
                        }
                    })
            }
            #expect(finished)
            guard finished else { return }
            for fixture in fixtures {
                let expected: Result<Int, TestError>? =
                    switch (kind, otherSucceeds) {
                    case ("firstSucceeded", true): .success(7)
                    case ("firstSucceeded", false): nil
                    case (_, true): nil
                    default: .failure(.failed(1))
                    }
                #expect(fixture.joined.peek() == expected, "\(kind)")
                #expect(fixture.runs.value == (expected == nil ? 0 : 1))
                #expect(fixture.live.value == 0)
                #expect(fixture.orphaned.live.value == 0)
            }
        }

        @Test func joinsWithMixedInputs() {
            // Inputs: orphaned, succeeded already, pending then succeeded, orphaned twice (same attempt).
            let a = Slot<TestError>()
            let b = HeldWriter<Int, TestError>()
            let all = [a.attempt, Attempt(succeededWith: 1), b.attempt, a.attempt].allSucceeded()
            let first = [a.attempt, Attempt(failedWith: .failed(2)), b.attempt, a.attempt].firstSucceeded()
            let firstAllFail = [a.attempt, Attempt(failedWith: .failed(2)), a.attempt].firstSucceeded()
            let allOneFailed = [a.attempt, Attempt(failedWith: .failed(3)), b.attempt].allSucceeded()
            let live = LiveCount()
            let runs = Counter()
            Self.track(all, live, runs)
            Self.track(first, live, runs)
            Self.track(firstAllFail, live, runs)
            a.lose()
            #expect(firstAllFail.peek() == nil)
            #expect(allOneFailed.peek()?.failureValue == .failed(3))
            #expect(all.peek() == nil && first.peek() == nil)
            b.succeed(with: 5)
            #expect(all.peek() == nil, "all: orphaned")
            #expect(first.peek() == .success(5))
            #expect(runs.value == 1)
            #expect(live.value == 0)
            // A join made of only orphaned inputs, after the fact.
            let late = [a.attempt, a.attempt].allSucceeded()
            let lateFirst = [a.attempt].firstSucceeded()
            Self.track(late, live, runs)
            Self.track(lateFirst, live, runs)
            #expect(late.peek() == nil && lateFirst.peek() == nil)
            #expect(live.value == 0 && runs.value == 1)
            // An empty-else join with any Error: abandoned.
            let untyped = [Attempt<Int, any Error>(a.attempt.mapError(upon: .immediate) { $0 as any Error })]
                .allSucceeded()
            #expect(untyped.wait(for: .seconds(5))?.failureValue is AbandonedError)
        }

        // MARK: andThen, fallback, timeout

        @Test func andThenAndFallbackWhoseInnerAttemptIsOrphaned() {
            let live = LiveCount()
            let runs = Counter()
            // Inner orphaned after it was linked.
            let inner1 = Slot<TestError>()
            let a1 = Attempt<Int, TestError>(succeededWith: 1).andThen(upon: .immediate) { _ in inner1.attempt }
            let inner2 = Slot<TestError>()
            let f1 = Attempt<Int, TestError>(failedWith: .failed(1)).fallback(upon: .immediate) { _ in inner2.attempt }
            Self.track(a1, live, runs)
            Self.track(f1, live, runs)
            inner1.lose()
            inner2.lose()
            #expect(a1.peek() == nil && f1.peek() == nil)
            #expect(live.value == 0, "handlers of stages whose inner attempt is orphaned are released")
            // Inner orphaned before the step returns it.
            let source = HeldWriter<Int, TestError>()
            let a2 = source.attempt.andThen(upon: .immediate) { _ in inner1.attempt }
            let f2 = source.attempt.fallback(upon: .immediate) { _ in inner2.attempt }
                .map(upon: .immediate) { $0 }
            let f3 = source.attempt.map(upon: .immediate) { _ in 0 }
                .andThen(upon: DispatchQueue.global()) { _ -> Attempt<Int, TestError> in inner1.attempt }
            Self.track(a2, live, runs)
            Self.track(f2, live, runs)
            Self.track(f3, live, runs)
            source.succeed(with: 1)
            #expect(a2.peek() == nil)
            #expect(f2.peek() == .success(1))
            #expect(a2.wait(for: .milliseconds(5)) == nil)
            let deadline = ContinuousClock.now + .seconds(5)
            while live.value > 0, ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.001) }
            #expect(live.value == 0)
            #expect(runs.value == 1, "only f2 ran")
            #expect(f3.peek() == nil)
        }

        @Test func aTimeoutBelowAnOrphanedAttemptStillTimesOutWhenOnlyItsDownstreamIsHeld() {
            let slot = Slot<TestError>()
            let tail = slot.attempt
                .timeout(after: .milliseconds(30), upon: DispatchQueue.global(), failingWith: .timedOut)
                .map(upon: .immediate) { $0 + 1 }
            let held = slot.attempt.timeout(
                after: .milliseconds(30), upon: DispatchQueue.global(), failingWith: .timedOut)
            let live = LiveCount()
            let runs = Counter()
            Self.track(tail, live, runs)
            slot.lose()
            let releasedAtOnce = live.value == 0
            #expect(held.wait(for: .seconds(5)) == .failure(.timedOut), "the held timeout stage")
            #expect(
                tail.wait(for: .seconds(5)) == .failure(.timedOut),
                "a stage after the timeout stage (its handler was released at once, unrun: \(releasedAtOnce))")
            // The wait sees the result as it is published; the filler runs the handler after.
            let deadline = ContinuousClock.now + .seconds(5)
            while runs.value == 0, ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.001) }
            #expect(runs.value == 1)
        }

        @Test func aTimeoutOverABridgedFutureStillTimesOutWhenOnlyItsDownstreamIsHeld() {
            var source: Deferred<Result<Int, TestError>>? = Deferred()
            let tail = Attempt(source!)
                .timeout(after: .milliseconds(30), upon: DispatchQueue.global(), failingWith: .timedOut)
                .map(upon: .immediate) { $0 + 1 }
            source = nil
            #expect(tail.wait(for: .seconds(5)) == .failure(.timedOut))
        }

        final class TimeoutFixture: Sendable {
            let slot = Slot<TestError>()
            let tail: Attempt<Int, TestError>
            let runs = Counter()
            let live = LiveCount()
            init() {
                tail = slot.attempt
                    .timeout(
                        after: .microseconds(Int.random(in: 0..<200)), upon: DispatchQueue.global(),
                        failingWith: .timedOut
                    )
                    .map(upon: .immediate) { $0 + 1 }
                OrphaningAttackTests.track(tail, live, runs)
            }
        }

        /// The writer goes while the limit fires; only the stage after the timeout stage is held.
        @Test func writerReleaseRacesTheLimitOfATimeoutStage() {
            let fixtures = (0..<300).map { _ in TimeoutFixture() }
            let finished = returnsOnAThread(within: 30) {
                RaceHarness.run(fixtures, left: { $0.slot.lose() }, right: { _ = $0.tail.peek() })
            }
            #expect(finished)
            guard finished else { return }
            for fixture in fixtures {
                #expect(fixture.tail.wait(for: .seconds(5)) == .failure(.timedOut))
                let deadline = ContinuousClock.now + .seconds(5)
                while fixture.live.value > 0, ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.001) }
                #expect(fixture.runs.value == 1)
                #expect(fixture.live.value == 0)
                #expect(fixture.slot.live.value == 0)
            }
        }

        final class TwoLossFixture: Sendable {
            let a = Slot<TestError>()
            let b = Slot<TestError>()
            let joins: [Attempt<Int, TestError>]
            let untyped: Attempt<[Int], any Error>
            let live = LiveCount()
            let runs = Counter()
            init() {
                joins = [
                    [a.attempt, b.attempt].allSucceeded().map(upon: .immediate) { $0[0] },
                    [a.attempt, b.attempt].firstSucceeded(),
                    OrphaningAttackTests.second(of: a.attempt.and(b.attempt)),
                    [a.attempt, b.attempt, a.attempt, b.attempt].firstSucceeded(),
                ]
                untyped = [
                    a.attempt.mapError(upon: .immediate) { $0 as any Error },
                    b.attempt.mapError(upon: .immediate) { $0 as any Error },
                ].allSucceeded()
                for join in joins {
                    OrphaningAttackTests.track(join, live, runs)
                }
                OrphaningAttackTests.track(untyped, live, runs)
            }
        }

        @Test func twoInputsOfAJoinOrphanedOnTwoThreadsAtOnce() {
            let fixtures = (0..<Self.rounds).map { _ in TwoLossFixture() }
            let finished = returnsOnAThread(within: 30) {
                RaceHarness.run(fixtures, left: { $0.a.lose() }, right: { $0.b.lose() })
            }
            #expect(finished)
            guard finished else { return }
            for fixture in fixtures {
                #expect(fixture.joins.allSatisfy { $0.peek() == nil })
                #expect(fixture.untyped.peek()?.failureValue is AbandonedError)
                #expect(fixture.runs.value == 1, "only the untyped join's handler ran")
                #expect(fixture.live.value == 0)
                #expect(fixture.a.live.value == 0 && fixture.b.live.value == 0)
            }
        }

        // MARK: Bridged futures

        @Test func bridgedDeferredValuesReleasedUnfilled() {
            let live = LiveCount()
            let runs = Counter()
            var source: Deferred<Int>? = Deferred<Int>()
            var resultSource: Deferred<Result<Int, Plain>>? = Deferred()
            let plain = Attempt<Int, TestError>(source!)
            let never = Attempt<Int, Never>(resultSource!.map(upon: .immediate) { (try? $0.get()) ?? 0 })
            let typed = Attempt<Int, Plain>(resultSource!)
            Self.track(plain.map(upon: .immediate) { $0 }, live, runs)
            Self.track(typed.map(upon: .immediate) { $0 }, live, runs)
            Self.track(never, live, runs)
            source = nil
            resultSource = nil
            #expect(plain.peek() == nil && typed.peek() == nil)
            #expect(runs.value == 0)
            #expect(live.value <= 1, "the bridged attempts' handlers are released (never: \(never.peek() == nil))")
            plain.cancel()
            #expect(plain.isCancelled && plain.peek() == nil)
        }

        final class BridgeFixture: Sendable {
            let source = Mutex<Deferred<Result<Int, TestError>>?>(Deferred())
            let attempt: Attempt<Int, TestError>
            let live = LiveCount()
            let runs = Counter()
            init() {
                attempt = Attempt(source.withLock { $0! })
            }
        }

        @Test func bridgedFutureReleaseRacesCancelAndNewStages() {
            let fixtures = (0..<Self.rounds).map { _ in BridgeFixture() }
            let finished = returnsOnAThread(within: 30) {
                RaceHarness.run(
                    fixtures,
                    left: { fixture in
                        let source = fixture.source.withLock { $0.take() }
                        blackHole(source)
                    },
                    right: { fixture in
                        OrphaningAttackTests.track(
                            fixture.attempt.map(upon: .immediate) { $0 }, fixture.live, fixture.runs)
                        fixture.attempt.cancel()
                        OrphaningAttackTests.track(fixture.attempt, fixture.live, fixture.runs)
                    })
            }
            #expect(finished)
            guard finished else { return }
            for fixture in fixtures {
                let result = fixture.attempt.peek()
                #expect(result == nil || result == .failure(.cancelled))
                #expect(fixture.attempt.isCancelled)
                #expect(fixture.runs.value == (result == nil ? 0 : 2))
                #expect(fixture.live.value == 0)
            }
        }

        // MARK: Deep chains

        @Test func deepChainsOfJoinsAndAndThensAreOrphanedWithoutOverflow() async {
            let depth = TestSize.attack.depth
            let outcome = await onDeepStack("orphaned joins and andThens", size: .attack) {
                var report: [String] = []
                do {
                    let live = LiveCount()
                    var held: HeldWriter<Int, TestError>? = HeldWriter()
                    var tail = held!.attempt
                    for level in 0..<depth {
                        switch level % 4 {
                        case 0: tail = [tail, Attempt(succeededWith: 1)].allSucceeded().map(upon: .immediate) { $0[0] }
                        case 1: tail = [tail, Attempt(failedWith: .failed(0))].firstSucceeded()
                        case 2: tail = OrphaningAttackTests.second(of: Attempt(succeededWith: 0).and(tail))
                        default: tail = tail.mapError(upon: .immediate) { $0 }
                        }
                    }
                    let tracked = LifetimeTracked(live)
                    tail.upon(.immediate) { _ in _ = tracked }
                    _ = consume tracked
                    held = nil
                    report.append("joins: peek \(tail.peek() == nil ? "nil" : "set"), live \(live.value)")
                }
                do {
                    // Each stage's inner attempt is the previous stage: a chain of followed inner attempts.
                    let live = LiveCount()
                    var held: HeldWriter<Int, TestError>? = HeldWriter()
                    var tail = held!.attempt
                    for level in 0..<depth {
                        let previous = tail
                        tail =
                            level % 2 == 0
                            ? Attempt<Int, TestError>(succeededWith: 0).andThen(upon: .immediate) { _ in previous }
                            : Attempt<Int, TestError>(failedWith: .failed(0)).fallback(upon: .immediate) { _ in previous
                            }
                    }
                    let tracked = LifetimeTracked(live)
                    tail.upon(.immediate) { _ in _ = tracked }
                    _ = consume tracked
                    held = nil
                    report.append("inner: peek \(tail.peek() == nil ? "nil" : "set"), live \(live.value)")
                }
                do {
                    // A deep chain of maps orphaned while another thread hangs stages off the middle.
                    let live = LiveCount()
                    let slot = Slot<TestError>(live: live)
                    var tail = slot.attempt
                    var middle = tail
                    for level in 0..<depth {
                        tail = tail.map(upon: .immediate) { $0 + 1 }
                        if level == depth / 2 { middle = tail }
                    }
                    let runs = Counter()
                    OrphaningAttackTests.track(tail, live, runs)
                    let group = DispatchGroup()
                    let midpoint = middle
                    DispatchQueue.global().async(group: group) {
                        for _ in 0..<200 {
                            OrphaningAttackTests.track(midpoint.map(upon: .immediate) { $0 }, live, runs)
                        }
                    }
                    slot.lose()
                    group.wait()
                    report.append(
                        "maps: peek \(tail.peek() == nil ? "nil" : "set"), live \(live.value), runs \(runs.value)")
                }
                return report
            }
            #expect(
                outcome == [
                    "joins: peek nil, live 0", "inner: peek nil, live 0", "maps: peek nil, live 0, runs 0",
                ])
        }

        @Test func deepChainsWhoseEveryStageIsHeldAreOrphanedWithoutOverflow() async {
            let depth = TestSize.attack.depth
            let outcome = await onDeepStack("orphaned chains, every stage held", size: .attack) {
                var report: [String] = []
                for shape in 0..<3 {
                    let live = LiveCount()
                    let runs = Counter()
                    var held: HeldWriter<Int, TestError>? = HeldWriter()
                    var stages: [Attempt<Int, TestError>] = [held!.attempt]
                    stages.reserveCapacity(depth + 1)
                    for level in 0..<depth {
                        let tail = stages[stages.count - 1]
                        switch shape {
                        case 0: stages.append(tail.map(upon: .immediate) { $0 + 1 })
                        case 1:
                            stages.append(
                                level % 2 == 0
                                    ? [tail, Attempt(succeededWith: 1)].allSucceeded().map(upon: .immediate) { $0[0] }
                                    : [Attempt(failedWith: .failed(0)), tail].firstSucceeded())
                        default:
                            stages.append(tail.andThen(upon: .immediate) { Attempt(succeededWith: $0) })
                        }
                    }
                    for stage in stages.suffix(3) {
                        OrphaningAttackTests.track(stage, live, runs)
                    }
                    held = nil
                    let pending = stages.filter { $0.peek() != nil }.count
                    report.append("shape \(shape): decided \(pending), live \(live.value), runs \(runs.value)")
                    // Every stage is cancelled after the fact: no result appears.
                    stages[depth / 2].cancel()
                    stages[0].cancel()
                    if stages.contains(where: { $0.peek() != nil }) {
                        report.append("shape \(shape): a result after cancel()")
                    }
                }
                return report
            }
            #expect(outcome == (0..<3).map { "shape \($0): decided 0, live 0, runs 0" })
        }

        final class JoinCancelFixture: Sendable {
            let orphaned = Slot<TestError>()
            let other = HeldWriter<Int, TestError>()
            let joined: Attempt<Int, TestError>
            let runs = Counter()
            let live = LiveCount()
            init() {
                joined = [orphaned.attempt, other.attempt].firstSucceeded()
                other.fail(with: .failed(1))
                OrphaningAttackTests.track(joined, live, runs)
            }
        }

        @Test func theLastLossOfAJoinRacesItsCancel() {
            let fixtures = (0..<Self.rounds).map { _ in JoinCancelFixture() }
            let finished = returnsOnAThread(within: 30) {
                RaceHarness.run(fixtures, left: { $0.orphaned.lose() }, right: { $0.joined.cancel() })
            }
            #expect(finished)
            guard finished else { return }
            var counts: [String: Int] = [:]
            for fixture in fixtures {
                let result = fixture.joined.peek()
                counts[result.map { "\($0)" } ?? "nil", default: 0] += 1
                #expect(result == nil || result == .failure(.cancelled))
                #expect(fixture.joined.isCancelled)
                #expect(fixture.runs.value == (result == nil ? 0 : 1))
                #expect(fixture.live.value == 0 && fixture.orphaned.live.value == 0)
            }
            progress("join cancel race: \(counts)")
        }

        /// The steps of held stages (their closures) are released once the stage is orphaned, as
        /// they are once it is cancelled.
        @Test(arguments: ["orphaned", "cancelled"])
        func theStepsOfHeldOrphanedStagesAreReleased(_ how: String) {
            let slot = Slot<TestError>()
            let names = ["map", "mapError", "andThen", "fallback", "recover", "filter", "reduce", "retry"]
            let lives = names.map { _ in LiveCount() }
            var stages: [Attempt<Int, TestError>] = []
            for (index, name) in names.enumerated() {
                let tracked = LifetimeTracked(lives[index])
                let source = slot.attempt
                let stage: Attempt<Int, TestError> =
                    switch name {
                    case "map":
                        source.map(upon: .immediate) {
                            _ = tracked
                            return $0
                        }
                    case "mapError":
                        source.mapError(upon: .immediate) {
                            _ = tracked
                            return $0
                        }
                    case "andThen":
                        source.andThen(upon: .immediate) {
                            _ = tracked
                            return Attempt(succeededWith: $0)
                        }
                    case "fallback":
                        source.fallback(upon: .immediate) {
                            _ = tracked
                            return Attempt(failedWith: $0)
                        }
                    case "recover":
                        source.recover(upon: .immediate) { error throws(TestError) in
                            _ = tracked
                            throw error
                        }
                    case "filter":
                        source.filter(upon: .immediate, failingWith: .failed(0)) {
                            _ = tracked
                            return $0 > 0
                        }
                    case "reduce":
                        [source].reduce(0, upon: .immediate) {
                            _ = tracked
                            return $0 + $1
                        }
                    default:
                        Attempt.retry(attempts: 2, upon: StoppedClock()) {
                            _ = tracked
                            return source
                        }
                    }
                _ = consume tracked
                stages.append(stage)
            }
            if how == "cancelled" {
                for stage in stages { stage.cancel() }
            }
            slot.lose()
            if how == "orphaned" {
                #expect(stages.allSatisfy { $0.peek() == nil })
            }
            let held = names.indices.filter { lives[$0].value != 0 }.map { names[$0] }
            #expect(held.isEmpty, "\(how): the steps of these held stages are still held: \(held)")
            withExtendedLifetime(stages) {}
        }

        // MARK: Shared runs

        @Test func aSharedRunWhoseWorkIsOrphanedLeavesTheTableAndANewCallerStartsAgain() {
            let table = SharedAttempts<Int, Int, TestError>()
            let starts = Counter()
            let slot = Slot<TestError>()
            let live = LiveCount()
            let runs = Counter()
            let first = table.attempt(for: 0) { _ in
                starts.increment()
                return slot.attempt
            }
            let second = table.attempt(for: 0) { _ in
                starts.increment()
                return slot.attempt
            }
            Self.track(first, live, runs)
            Self.track(second, live, runs)
            #expect(starts.value == 1)
            slot.lose()
            #expect(first.peek() == nil && second.peek() == nil)
            #expect(live.value == 0 && runs.value == 0)
            #expect(slot.live.value == 0)
            #expect(!table.contains(0), "the orphaned run left the table")
            let writer = HeldWriter<Int, TestError>()
            let third = table.attempt(for: 0) { _ in
                starts.increment()
                return writer.attempt
            }
            #expect(starts.value == 2, "a new caller starts new work")
            writer.succeed(with: 3)
            #expect(third.peek() == .success(3))
            first.cancel()
            #expect(first.isCancelled && first.peek() == nil)
        }

        @Test func aSharedRunWhoseStartReturnsAnOrphanedAttempt() {
            let table = SharedAttempts<Int, Int, TestError>()
            let slot = Slot<TestError>()
            slot.lose()
            let live = LiveCount()
            let runs = Counter()
            let starts = Counter()
            let caller = table.attempt(for: 1) { _ in
                starts.increment()
                return slot.attempt.map(upon: .immediate) { $0 }
            }
            Self.track(caller, live, runs)
            #expect(caller.peek() == nil)
            #expect(live.value == 0 && runs.value == 0)
            #expect(!table.contains(1))
            let writer = HeldWriter<Int, TestError>()
            let again = table.attempt(for: 1) { _ in
                starts.increment()
                return writer.attempt
            }
            writer.succeed(with: 4)
            #expect(starts.value == 2)
            #expect(again.peek() == .success(4))
        }

        @Test func retryWhoseAttemptsAreOrphanedReleasesEverything() {
            let live = LiveCount()
            let runs = Counter()
            let starts = Counter()
            let slots = Mutex<[Slot<TestError>]>([])
            let retried = Attempt<Int, TestError>.retry(attempts: 3, upon: StoppedClock()) {
                starts.increment()
                let slot = Slot<TestError>(live: live)
                slots.withLock { $0.append(slot) }
                return slot.attempt
            }
            Self.track(retried, live, runs)
            for _ in 0..<3 {
                let slot = slots.withLock { $0.isEmpty ? nil : $0.removeFirst() }
                slot?.lose()
            }
            let result = retried.peek()
            #expect(runs.value == (result == nil ? 0 : 1))
            #expect(live.value == 0, "starts \(starts.value), result \(String(describing: result))")
        }

        @Test func aWaitOnAnOrphanedAttemptLastsUntilItsDeadline() {
            let slot = Slot<TestError>()
            let derived = slot.attempt.map(upon: .immediate) { $0 }
            slot.lose()
            for target in [slot.attempt, derived] {
                let started = ContinuousClock.now
                #expect(target.wait(for: .milliseconds(30)) == nil)
                let elapsed = ContinuousClock.now - started
                #expect(elapsed >= .milliseconds(25) && elapsed < .seconds(5), "waited \(elapsed)")
                #expect(!target.isFilled)
            }
        }

        final class SharedFixture: Sendable {
            let table = SharedAttempts<Int, Int, TestError>()
            let slot = Slot<TestError>()
            let starts = Counter()
            let fresh = HeldWriter<Int, TestError>()
            let first: Attempt<Int, TestError>
            let late = Mutex<Attempt<Int, TestError>?>(nil)
            let live = LiveCount()
            let runs = Counter()
            init() {
                let slot = self.slot
                first = table.attempt(for: 0) { [starts] _ in
                    starts.increment()
                    return slot.attempt
                }
            }
        }

        @Test func orphaningOfASharedRunRacesANewCaller() {
            let fixtures = (0..<Self.rounds).map { _ in SharedFixture() }
            let finished = returnsOnAThread(within: 30) {
                RaceHarness.run(
                    fixtures,
                    left: { $0.slot.lose() },
                    right: { fixture in
                        let fresh = fixture.fresh
                        let late = fixture.table.attempt(for: 0) { [starts = fixture.starts] _ in
                            starts.increment()
                            return fresh.attempt
                        }
                        OrphaningAttackTests.track(late, fixture.live, fixture.runs)
                        fixture.late.withLock { $0 = late }
                    })
            }
            #expect(finished)
            guard finished else { return }
            var counts: [String: Int] = [:]
            for fixture in fixtures {
                let late = fixture.late.withLock { $0 }!
                fixture.fresh.succeed(with: 9)
                #expect(fixture.first.peek() == nil)
                if fixture.starts.value == 2 {
                    counts["new run", default: 0] += 1
                    #expect(late.peek() == .success(9))
                    #expect(fixture.runs.value == 1)
                } else {
                    counts["joined the orphaned run", default: 0] += 1
                    #expect(late.peek() == nil)
                    #expect(fixture.runs.value == 0)
                }
                #expect(fixture.live.value == 0)
                #expect(!fixture.table.contains(0))
            }
            progress("shared race: \(counts)")
        }
    }
}
