import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

/// Guarantee 17: a pending attempt that none of its deciders can decide any more (its writer is
/// gone, the future it was made from was released unfilled) is released with everything only it
/// kept, for every failure type: an `any Error` or `AbandonableError` attempt fails as abandoned;
/// any other is *orphaned*: it never gets a result, its handlers and its producer's cancel
/// handlers are released unrun, and every stage that only it could decide follows, except a
/// stage with a decider of its own (a limit, another input of a join).
@Suite struct OrphanedAttemptTests {
    /// How the only decider of the root goes.
    enum Loss: String, CaseIterable, CustomTestStringConvertible {
        /// The writer is released undecided.
        case writer
        /// The attempt was made from a `Deferred` that is released unfilled.
        case bridgedFuture
        /// The attempt was made from a future written outside the library, whose `upon`
        /// callback is released unrun (the `Deferred` it reads through is released unfilled).
        case userFuture

        var testDescription: String { rawValue }

        /// A pending root whose decider is still alive in `keep` until the caller drops it, and
        /// whose producer's cancel handler (where there is one) holds a tracked object.
        func root<Failure: Error>(
            _: Failure.Type, tracking live: LiveCount, keep: inout [any Sendable]
        ) -> Attempt<Int, Failure> {
            switch self {
            case .writer:
                let writer = HeldWriter<Int, Failure>()
                let tracked = LifetimeTracked(live)
                writer.onCancel { _ = tracked }
                keep.append(writer)
                return writer.attempt
            case .bridgedFuture:
                let source = Deferred<Result<Int, Failure>>()
                keep.append(source)
                return Attempt(source)
            case .userFuture:
                let source = Deferred<Result<Int, Failure>>()
                keep.append(source)
                return Attempt(CountingFuture(base: source))
            }
        }
    }

    /// One stage of a chain, for any failure type.
    enum Stage: String, CaseIterable, CustomTestStringConvertible {
        case map, andThen, delay, allSucceeded, firstSucceeded, retry, and

        var testDescription: String { rawValue }

        /// The second value of a pair.
        static func second<Failure: Error>(of pair: Attempt<(Int, Int), Failure>) -> Attempt<Int, Failure> {
            pair.map(upon: .immediate) { (_: Int, second: Int) in second }
        }

        func stage<Failure: Error>(after attempt: Attempt<Int, Failure>) -> Attempt<Int, Failure> {
            switch self {
            case .map: attempt.map(upon: .immediate) { $0 + 1 }
            case .andThen: attempt.andThen(upon: .immediate) { Attempt(succeededWith: $0 + 1) }
            case .delay: attempt.delay(by: .zero, upon: DispatchQueue.global())
            case .allSucceeded: [attempt].allSucceeded().map(upon: .immediate) { $0[0] }
            case .firstSucceeded: [attempt].firstSucceeded()
            case .retry: Attempt.retry(attempts: 1, upon: StoppedClock()) { attempt }
            case .and: Self.second(of: attempt.and(Attempt<Int, Failure>(succeededWith: 1)))
            }
        }
    }

    /// A failure type that cannot say "abandoned" and has no cancellation error.
    enum Plain: Error, Equatable { case failed }

    /// A failure type that can say "abandoned".
    enum Abandonable: CancellableError, AbandonableError, Equatable { case failed, cancelled, abandoned }

    // MARK: Orphaned

    @Test(arguments: Loss.allCases, AttemptKind.allCases)
    func everyKindBelowALostDeciderIsOrphanedAndReleased(_ loss: Loss, _ kind: AttemptKind) {
        let live = LiveCount()
        var keep: [any Sendable] = []
        let root = loss.root(TestError.self, tracking: live, keep: &keep)
        let tail = kind.stage(after: root, delayingOn: DispatchQueue(label: "delays"))
        let delivered = Counter()
        let tracked = LifetimeTracked(live)
        tail.upon(.immediate) { _ in
            _ = tracked
            delivered.increment()
        }
        _ = consume tracked
        keep.removeAll()
        // The kinds' timeout measures its limit on a clock that drops the limit's body: it has
        // lost both its deciders too.
        #expect(live.value == 0, "the handlers and the producer's cancel handler are released")
        #expect(root.peek() == nil && tail.peek() == nil)
        #expect(delivered.value == 0)
    }

    @Test(arguments: Loss.allCases, Stage.allCases)
    func anOrphanedChainIsReleasedForEveryFailureTypeThatCannotSayAbandoned(_ loss: Loss, _ stage: Stage) {
        expectOrphaned(TestError.self, loss, stage)
        expectOrphaned(Plain.self, loss, stage)
        expectOrphaned(Never.self, loss, stage)
    }

    private func expectOrphaned<Failure: Error>(_ type: Failure.Type, _ loss: Loss, _ stage: Stage) {
        let live = LiveCount()
        var keep: [any Sendable] = []
        let tail = stage.stage(after: loss.root(type, tracking: live, keep: &keep))
        let tracked = LifetimeTracked(live)
        tail.upon(.immediate) { _ in _ = tracked }
        _ = consume tracked
        keep.removeAll()
        #expect(live.value == 0, "\(type): the handlers are released")
        #expect(tail.peek() == nil)
        // What readers see of an orphaned attempt.
        #expect(tail.wait(for: .milliseconds(2)) == nil, "a wait times out as usual")
        let late = LifetimeTracked(live)
        tail.upon(.immediate) { _ in _ = late }
        #expect(live.value == 1, "a later handler is released at once, unrun")
        _ = consume late
        tail.cancel()
        #expect(tail.isCancelled, "cancel() says so")
        #expect(tail.peek() == nil, "an orphaned attempt never gets a result")
    }

    @Test(arguments: Loss.allCases, Stage.allCases)
    func aFailureTypeThatCanSayAbandonedFailsInstead(_ loss: Loss, _ stage: Stage) {
        let live = LiveCount()
        var keep: [any Sendable] = []
        let typed = stage.stage(after: loss.root(Abandonable.self, tracking: live, keep: &keep))
        let untyped = stage.stage(after: loss.root((any Error).self, tracking: live, keep: &keep))
        keep.removeAll()
        #expect(typed.wait(for: .seconds(10)) == .failure(.abandoned))
        #expect(untyped.wait(for: .seconds(10))?.failureValue is AbandonedError)
        #expect(live.value == 0)
    }

    @Test func aCancelledTaskWaitingOnAnOrphanedAttemptThrowsTheCancellationError() async {
        var keep: [any Sendable] = []
        let attempt = Loss.writer.root(TestError.self, tracking: LiveCount(), keep: &keep).map(upon: .immediate) { $0 }
        let waiting = Task { try await attempt.get() }
        keep.removeAll()
        #expect(attempt.peek() == nil)
        waiting.cancel()
        await #expect(throws: TestError.cancelled) { try await waiting.value }
    }

    @Test func aTaskThatStartsWaitingAfterTheOrphaningThrowsWhenCancelled() async {
        var keep: [any Sendable] = []
        let attempt = Loss.bridgedFuture.root(TestError.self, tracking: LiveCount(), keep: &keep)
        keep.removeAll()
        let waiting = Task { try await attempt.get() }
        waiting.cancel()
        await #expect(throws: TestError.cancelled) { try await waiting.value }
    }

    // MARK: Bodies an executor drops

    /// A body an attempt submits to an executor to be decided.
    enum Body: String, CaseIterable, CustomTestStringConvertible {
        case work, map, mapError, recover, andThen, fallback, delay, retry

        var testDescription: String { rawValue }

        func attempt<Failure: Error>(
            upon under: ExecutorUnderTest, succeeded: Attempt<Int, Failure>, failed: Attempt<Int, Failure>
        ) -> Attempt<Int, Failure> {
            attempt(upon: under.executor, scheduling: under.scheduling, succeeded: succeeded, failed: failed)
        }

        func attempt<Failure: Error>(
            upon executor: any Executor, scheduling: any SchedulingExecutor, succeeded: Attempt<Int, Failure>,
            failed: Attempt<Int, Failure>
        ) -> Attempt<Int, Failure> {
            switch self {
            case .work: Attempt(upon: executor) { () throws(Failure) in 1 }
            case .map: succeeded.map(upon: executor) { $0 + 1 }
            case .mapError: failed.mapError(upon: executor) { $0 }
            case .recover: failed.recover(upon: executor) { _ in 1 }
            case .andThen: succeeded.andThen(upon: executor) { Attempt(succeededWith: $0) }
            case .fallback: failed.fallback(upon: executor) { _ in Attempt(succeededWith: 1) }
            case .delay: succeeded.delay(by: .milliseconds(1), upon: scheduling)
            // The try fails at once; the loop decides on a retry in a body on `scheduling`.
            case .retry: Attempt.retry(attempts: 2, upon: scheduling) { failed }
            }
        }
    }

    /// The executors that drop bodies: a shut-down thread, and an invalidated token's executor.
    static let stoppable: [ExecutorKind] = ExecutorKind.allCases.filter { $0.makeStoppable() != nil }

    @Test(arguments: stoppable, Body.allCases)
    func anAttemptWhoseBodyAStoppedExecutorDropsIsOrphaned(_ kind: ExecutorKind, _ body: Body) throws {
        let stoppable = try #require(kind.makeStoppable())
        stoppable.stop()
        let live = LiveCount()
        let orphaned = body.attempt(
            upon: stoppable.under, succeeded: Attempt<Int, TestError>(succeededWith: 1),
            failed: Attempt(failedWith: .failed(1)))
        let tail = orphaned.map(upon: .immediate) { $0 }
        let tracked = LifetimeTracked(live)
        tail.upon(.immediate) { _ in _ = tracked }
        _ = consume tracked
        #expect(live.value == 0, "the dropped body orphaned the attempt and what only it decided")
        #expect(orphaned.peek() == nil && tail.peek() == nil)
        let untyped = body.attempt(
            upon: stoppable.under, succeeded: Attempt<Int, any Error>(succeededWith: 1),
            failed: Attempt(failedWith: TestError.failed(1)))
        #expect(untyped.peek()?.failureValue is AbandonedError, "an any Error attempt fails as abandoned")
    }

    /// Every body but a retry's: a retry loop keeps its executor for the retries to come, so an
    /// executor released with the loop's body queued is kept by that loop (a known limit, in
    /// ErrorsAndCancellation.md).
    static let releasable = Body.allCases.filter { $0 != .retry }

    /// A manual executor and a virtual clock released with the body still queued: nothing else
    /// keeps them (the stage lets go of its executor once it has submitted its step), so the body
    /// goes with them and orphans its attempt.
    @Test(arguments: releasable)
    func anAttemptWhoseBodyIsQueuedOnAReleasedExecutorIsOrphaned(_ body: Body) {
        let live = LiveCount()
        var tails: [Attempt<Int, TestError>] = []
        do {
            let clock = VirtualTimeExecutor()
            let places: [(any Executor, any SchedulingExecutor)] = [(ManualExecutor(), clock), (clock, clock)]
            for (executor, scheduling) in places {
                let tail = body.attempt(
                    upon: executor, scheduling: scheduling, succeeded: Attempt<Int, TestError>(succeededWith: 1),
                    failed: Attempt(failedWith: .failed(1))
                ).map(upon: .immediate) { $0 }
                let tracked = LifetimeTracked(live)
                tail.upon(.immediate) { _ in _ = tracked }
                _ = consume tracked
                tails.append(tail)
            }
            // Both executors live to here in an optimized build too, which may otherwise end
            // `places` at its last use, and the manual executor with it.
            withExtendedLifetime(places) {
                #expect(live.value == 2, "pending while the executors live")
            }
        }
        #expect(live.value == 0, "the executors went, and with them the bodies: both attempts are orphaned")
        #expect(tails.allSatisfy { $0.peek() == nil })
    }

    /// A retry waiting out its backoff on a thread that shuts down: the timer's body is dropped,
    /// and with it the loop's only way on.
    @Test func aRetryWhoseBackoffTimerIsDroppedIsOrphaned() throws {
        let live = LiveCount()
        let started = Counter()
        let thread = ThreadExecutor(name: "orphaned.retry")
        let decided = Deferred<Void>()
        let tracked = LifetimeTracked(live)
        let retried = Attempt<Int, TestError>.retry(
            attempts: 3, delay: .seconds(3_600), upon: thread,
            while: { _ in
                decided.fill()
                return true
            },
            {
                _ = tracked
                started.increment()
                return Attempt(failedWith: .failed(0))
            })
        _ = consume tracked
        try #require(decided.wait(for: .seconds(30)) != nil, "the loop decided on a retry")
        #expect(thread.shutdown().wait(until: .now() + 30) != nil)
        // The shut-down thread released the backoff's body (or refused it, if the loop armed it
        // only after the shutdown): either way the loop lost its way on.
        let deadline = ContinuousClock.now + .seconds(30)
        while live.value != 0 && ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.001)
        }
        #expect(live.value == 0, "the loop is orphaned, its work released")
        #expect(retried.peek() == nil)
        #expect(started.value == 1)
    }

    // MARK: Joins with one input orphaned

    /// What the other input of a join does.
    enum Other: String, CaseIterable, CustomTestStringConvertible {
        case succeeds, fails, pending
        var testDescription: String { rawValue }
    }

    @Test(arguments: Other.allCases)
    func joinsWithAnOrphanedInputAreDecidedByTheOthersOrOrphaned(_ other: Other) {
        for join in ["allSucceeded", "and", "firstSucceeded"] {
            var keep: [any Sendable] = []
            let orphaned = Loss.writer.root(TestError.self, tracking: LiveCount(), keep: &keep)
            let second = HeldWriter<Int, TestError>()
            let joined: Attempt<Int, TestError> =
                switch join {
                case "allSucceeded": [orphaned, second.attempt].allSucceeded().map(upon: .immediate) { $0[1] }
                case "and": Stage.second(of: orphaned.and(second.attempt))
                default: [orphaned, second.attempt].firstSucceeded()
                }
            let live = LiveCount()
            let tracked = LifetimeTracked(live)
            joined.upon(.immediate) { _ in _ = tracked }
            _ = consume tracked
            keep.removeAll()
            switch other {
            case .succeeds:
                second.succeed(with: 7)
                // Only firstSucceeded can finish without the orphaned input.
                #expect(joined.peek() == (join == "firstSucceeded" ? .success(7) : nil), "\(join)")
                #expect(live.value == 0, "\(join): decided or orphaned, its handler is gone")
            case .fails:
                second.fail(with: .failed(1))
                #expect(joined.peek() == (join == "firstSucceeded" ? nil : .failure(.failed(1))), "\(join)")
                #expect(live.value == 0, "\(join): decided or orphaned, its handler is gone")
            case .pending:
                #expect(joined.peek() == nil, "\(join)")
                #expect(live.value == 1, "\(join): the other input can still decide it")
                second.fail(with: .failed(2))
                #expect(live.value == 0, "\(join)")
            }
        }
    }
}
