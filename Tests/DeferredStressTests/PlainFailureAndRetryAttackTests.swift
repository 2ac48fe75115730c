import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import TestSupport
import Testing

/// The translation of a `TestError` into a ``Plain``: a cancellation becomes code 0, a failure
/// its own code.
@Sendable private func plain(_ error: TestError) -> StressSuites.PlainFailureAndRetryAttackTests.Plain {
    switch error {
    case .failed(let code): .init(code: code)
    case .cancelled: .init(code: 0)
    case .timedOut: .init(code: -2)
    }
}

/// Returns once the main actor has run every delivery submitted to it before the call.
@MainActor private func flushMainActor() async {
    await withCheckedContinuation { continuation in
        Future(filledWith: ()).uponMainActor { continuation.resume() }
    }
}

extension StressSuites {
    /// Attacks through the public API only, on plain failure types, retries and writers.
    ///
    /// They cover `mapError` without an eager cancellation error and
    /// `mapError(upon:cancellingWith:transform:)`, `retry` asking `shouldRetry` on its executor,
    /// `DeferredAttemptBox`, `uponMainActor` as a requirement, and the debug warning of a
    /// blocking wait in a task. The first five tests each found a bug, since fixed.
    @Suite struct PlainFailureAndRetryAttackTests {
        static let depth = TestSize.attack.depth

        /// A failure type with no cancellation error of its own: neither a `CancellableError` nor
        /// `any Error`.
        struct Plain: Error, Equatable {
            let code: Int
        }

        /// An error that keeps an object alive, as an error with a payload does.
        struct TrackedError: Error {
            let tracked: LifetimeTracked
        }

        /// A box kept under a lock, as a dictionary of pending requests keeps it.
        final class BoxSlot<Success: Sendable, Failure: Error>: @unchecked Sendable {
            // `@unchecked Sendable` is sound: `box` is read and written only under `lock`.
            private let lock = NSLock()
            private var box: DeferredAttemptBox<Success, Failure>?

            /// Puts `box` in the slot.
            func set(_ box: DeferredAttemptBox<Success, Failure>) {
                lock.withLock { self.box = box }
            }

            /// The box, left in the slot.
            func get() -> DeferredAttemptBox<Success, Failure>? {
                lock.withLock { box }
            }

            /// The box, taken out of the slot: the caller's reference is then the slot's last one.
            func remove() -> DeferredAttemptBox<Success, Failure>? {
                lock.withLock {
                    defer { box = nil }
                    return box
                }
            }
        }
    }
}

// MARK: - mapError

extension StressSuites.PlainFailureAndRetryAttackTests {
    /// Guarantee 14 and `uponFailure`'s contract ("a cancelled attempt — cancelled itself, or
    /// failed because an attempt it depends on was cancelled — calls no failure callback"): a
    /// `mapError` into a plain type, of a source that is cancelled, must read as cancelled.
    ///
    /// (Found deciding with `cancelled: false` after the eager cancellation error was removed.)
    @Test func aPlainMapErrorOfACancelledSourceReadsAsCancelledAndReportsNoFailure() {
        let writer = DeferredAttempt<Int, TestError>()
        let failures = Counter()
        let mapped = writer.attempt.mapError(upon: .immediate, transform: plain)
        mapped.uponFailure(.immediate) { _ in failures.increment() }
        let after = mapped.map(upon: .immediate) { $0 + 1 }
        writer.attempt.cancel()
        #expect(mapped.peek() == .failure(Plain(code: 0)), "the source's cancellation, translated")
        #expect(mapped.isCancelled, "derived from a cancelled attempt, it reads as cancelled")
        #expect(failures.value == 0, "a cancellation is not a failure to report")
        #expect(after.isCancelled, "and so does the stage after it")
    }

    /// A cancelled plain `mapError` finishes at once with its source's cancellation, translated.
    ///
    /// (Found never finishing: a root decides a cancellation for lack of demand only when someone
    /// looks at it, and nothing looked, so the stage's `upon` handler never ran, a wait timed out
    /// and a task's `get()` hung.)
    @Test func aCancelledPlainMapErrorFinishesWithItsSourcesCancellationTranslated() {
        let writer = DeferredAttempt<Int, TestError>()
        let stopped = Counter()
        writer.onCancel { stopped.increment() }
        let handled = Counter()
        let mapped = writer.attempt.mapError(upon: .immediate, transform: plain)
        mapped.upon(.immediate) { _ in handled.increment() }
        mapped.cancel()
        #expect(stopped.value == 1, "the producer was told to stop")
        #expect(handled.value == 1, "the stage finished with its source's cancellation, translated")
        #expect(mapped.peek() == .failure(Plain(code: 0)))
        #expect(mapped.isCancelled)
        #expect(writer.attempt.isCancelled)
    }

    /// Guarantee 13 for the same stage: a task that gives up on `get()` does not hang.
    @Test func aCancelledTaskAwaitingAPlainMapErrorReturns() async {
        let writer = DeferredAttempt<Int, TestError>()
        let stopped = Counter()
        writer.onCancel { stopped.increment() }
        let mapped = writer.attempt.mapError(upon: .immediate, transform: plain)
        let finished = Counter()
        // The reader runs on `steps`, so the test knows when it has reached its `get()`.
        let steps = ManualExecutor()
        let reader = Task(executorPreference: steps) { () async throws(Plain) -> Int in
            defer { finished.increment() }
            return try await mapped.get()
        }
        steps.runUntilIdle()
        #expect(finished.value == 0, "the reader waits in get()")
        reader.cancel()
        steps.runUntilIdle()
        #expect(stopped.value == 1, "the producer was told to stop")
        #expect(finished.value == 1, "the cancelled task's get() returned")
        _ = writer.isCancelled  // Unblocks the task, so that the test ends either way.
        _ = await reader.result
    }

    /// The state of a race of a `mapError` stage's `cancel()`, on the stage's serial queue,
    /// against its source's failure.
    final class MapErrorRound: Sendable {
        let writer = DeferredAttempt<Int, TestError>()
        let queue = DispatchQueue(label: "mapError stage")
        let stopped = Counter()
        let translations = Counter()
        let failures = Counter()
        let cancelReturned = Counter()
        /// Transforms (for a stage with a cancellation error) and failure callbacks that started
        /// after `cancel()` returned.
        let lateStarts = Counter()
        let mapped: Attempt<Int, Plain>
        let finished = DispatchSemaphore(value: 0)

        init(cancellingWith error: Plain?) {
            writer.onCancel { [stopped] in stopped.increment() }
            let (translations, cancelReturned, lateStarts) = (translations, cancelReturned, lateStarts)
            let transform: @Sendable (TestError) -> Plain = { source in
                if error != nil, cancelReturned.value > 0 {
                    lateStarts.increment()
                }
                translations.increment()
                return plain(source)
            }
            mapped =
                if let error {
                    writer.attempt.mapError(upon: queue, cancellingWith: error, transform: transform)
                } else {
                    writer.attempt.mapError(upon: queue, transform: transform)
                }
            mapped.uponFailure(queue) { [failures] _ in
                if cancelReturned.value > 0 {
                    lateStarts.increment()
                }
                failures.increment()
            }
            mapped.upon(.immediate) { [finished] _ in finished.signal() }
        }

        func cancelOnItsQueue() {
            queue.sync {
                mapped.cancel()
                cancelReturned.increment()
            }
        }

        /// Waits for the stage's result and for its queue.
        func settle() -> Bool {
            let done = finished.wait(timeout: .now() + 10) == .success
            queue.sync {}
            return done
        }
    }

    /// Guarantees 9, 10 and 12 for `mapError(upon:cancellingWith:transform:)`: whatever the
    /// order, the source decides once, the transform runs at most once and never starts after
    /// `cancel()` returned, no failure callback starts after it, and the result is the
    /// translated failure or the given cancellation error.
    @Test func aMapErrorCancellingWithRacingItsSourcesFailureNeverTranslatesAfterCancelReturns() {
        RaceHarness.expectInterleavings(
            "mapError(cancellingWith:) cancel against the source's failure",
            rounds: TestSize.attack.raceRounds,
            expected: ["translated, then cancelled", "failed, cancelled before the transform", "cancelled first"],
            setup: { MapErrorRound(cancellingWith: Plain(code: -1)) },
            left: { $0.writer.fail(with: .failed(1)) },
            right: { $0.cancelOnItsQueue() },
            classify: { round in
                #expect(round.settle(), "the stage finished")
                #expect(round.lateStarts.value == 0, "a transform or failure callback started after cancel()")
                #expect(round.translations.value <= 1)
                #expect(round.failures.value <= round.translations.value)
                #expect(round.mapped.isCancelled)
                let source = round.writer.attempt.peek()
                #expect(round.stopped.value == (source == .failure(.cancelled) ? 1 : 0))
                if source == .failure(.cancelled) {
                    #expect(round.mapped.peek() == .failure(Plain(code: -1)))
                    #expect(round.translations.value == 0)
                    return "cancelled first"
                }
                #expect(source == .failure(.failed(1)))
                if round.translations.value == 1 {
                    #expect(round.mapped.peek() == .failure(Plain(code: 1)))
                    return "translated, then cancelled"
                }
                #expect(round.mapped.peek() == .failure(Plain(code: -1)))
                return "failed, cancelled before the transform"
            })
    }

    /// The documented behaviour of a plain `mapError` without `cancellingWith:` under the same
    /// race: the stage finishes once its source does, with the transform of the source's error,
    /// which runs exactly once on its queue (after `cancel()` if need be); callbacks that had not
    /// started are withdrawn; the producer is told to stop only if it had not failed.
    @Test func aPlainMapErrorRacingItsSourcesFailureTranslatesOnceAndWithdrawsItsCallbacks() {
        RaceHarness.expectInterleavings(
            "plain mapError cancel against the source's failure",
            rounds: TestSize.attack.raceRounds,
            expected: ["failed first", "cancelled first"],
            setup: { MapErrorRound(cancellingWith: nil) },
            left: { $0.writer.fail(with: .failed(1)) },
            right: { $0.cancelOnItsQueue() },
            classify: { round in
                #expect(round.settle(), "the stage finished")
                #expect(round.lateStarts.value == 0, "a failure callback started after cancel()")
                #expect(round.translations.value == 1, "the transform ran exactly once")
                #expect(round.mapped.isCancelled)
                let source = round.writer.attempt.peek()
                if source == .failure(.cancelled) {
                    #expect(round.stopped.value == 1)
                    #expect(round.failures.value == 0)
                    #expect(round.mapped.peek() == .failure(Plain(code: 0)))
                    return "cancelled first"
                }
                #expect(source == .failure(.failed(1)))
                #expect(round.stopped.value == 0)
                #expect(round.mapped.peek() == .failure(Plain(code: 1)))
                return "failed first"
            })
    }

    /// `mapError(upon:cancellingWith:transform:)` with a cancelled source: the stage fails at once
    /// with the given error, reads as cancelled, runs no transform and reports no failure; a stage
    /// after it that keeps its type inherits the error, and a retry of such stages fails with it
    /// once cancelled while `shouldRetry` waits, keeping nothing and starting nothing.
    @Test func aMapErrorCancellingWithPassesACancellationOnAsItsOwnError() {
        let writer = DeferredAttempt<Int, TestError>()
        let translations = Counter()
        let failures = Counter()
        let mapped = writer.attempt.mapError(upon: DispatchQueue(label: "never"), cancellingWith: Plain(code: -1)) {
            translations.increment()
            return plain($0)
        }
        mapped.uponFailure(.immediate) { _ in failures.increment() }
        let after = mapped.recover(upon: .immediate) { error throws(Plain) in throw error }
        writer.attempt.cancel()
        #expect(mapped.peek() == .failure(Plain(code: -1)) && mapped.isCancelled)
        #expect(after.peek() == .failure(Plain(code: -1)) && after.isCancelled)
        #expect(translations.value == 0 && failures.value == 0)

        let clock = VirtualTimeExecutor()
        let live = LiveCount()
        let starts = Counter()
        let retrying: Attempt<Int, Plain> = {
            let tracked = LifetimeTracked(live)
            return Attempt.retry(attempts: 3, upon: clock) {
                _ = tracked
                starts.increment()
                return Attempt<Int, TestError>(failedWith: .failed(1))
                    .mapError(upon: .immediate, cancellingWith: Plain(code: -1), transform: plain)
            }
        }()
        retrying.cancel()
        #expect(retrying.peek() == .failure(Plain(code: -1)))
        #expect(live.value == 0)
        clock.runUntilIdle()
        #expect(starts.value == 1)
    }

    /// Guarantee 4 for the new path: a chain of plain `mapError`s without a cancellation error,
    /// cancelled at its tail, stops the producer once and translates the cancellation once per
    /// stage, all without recursion.
    @Test(.skippedUnderThreadSanitizer)
    func aDeepChainOfPlainMapErrorsCancelledAtItsTailTranslatesOncePerStage() async {
        let depth = Self.depth
        let (tail, stopped, translations) = await onDeepStack(
            "plain mapError chain, cancelled at its tail", size: .attack
        ) {
            let producer = DeferredAttempt<Int, TestError>()
            let stopped = Counter()
            let translations = Counter()
            producer.onCancel { stopped.increment() }
            var tail = producer.attempt.mapError(upon: .immediate, transform: plain)
            for _ in 1..<depth {
                tail = tail.mapError(upon: .immediate) { error in
                    translations.increment()
                    return Plain(code: error.code + 1)
                }
            }
            tail.cancel()
            return (tail.peek(), stopped.value, translations.value)
        }
        #expect(stopped == 1)
        #expect(tail == .failure(Plain(code: depth - 1)), "the cancellation went through every stage")
        #expect(translations == depth - 1)
    }

    /// Guarantees 4 and 17: an unfinished chain of plain `mapError`s whose producer's writer is
    /// dropped (its type cannot say "abandoned") is released without recursion, with the
    /// captures of every stage.
    @Test(.skippedUnderThreadSanitizer)
    func aDeepUnfinishedChainOfPlainMapErrorsIsReleasedWithItsCaptures() async {
        let depth = Self.depth
        let live = LiveCount()
        let alive = await onDeepStack("plain mapError chain, dropped unfinished", size: .attack) {
            do {
                let producer = DeferredAttempt<Int, TestError>()
                var tail = producer.attempt.mapError(upon: .immediate, transform: plain)
                for _ in 1..<depth {
                    let tracked = LifetimeTracked(live)
                    tail = tail.mapError(upon: .immediate) { error in
                        _ = tracked
                        return Plain(code: error.code + 1)
                    }
                }
                tail.uponFailure(.immediate) { _ in }
            }
            return live.value
        }
        #expect(alive == 0, "the dead chain kept none of its transforms")
    }
}

// MARK: - retry

extension StressSuites.PlainFailureAndRetryAttackTests {
    /// What a retry's work starts.
    enum PlainSource: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// A typed attempt whose errors are translated by a plain `mapError`, which has no
        /// cancellation error.
        case plainMapError
        /// An attempt of a plain type made as failed: it never had a cancellation error.
        case plainAttempt

        var testDescription: String { rawValue }

        func start() -> Attempt<Int, Plain> {
            switch self {
            case .plainMapError:
                Attempt<Int, TestError>(failedWith: .failed(1)).mapError(upon: .immediate, transform: plain)
            case .plainAttempt: Attempt(failedWith: Plain(code: 1))
            }
        }
    }

    /// When a retry is cancelled.
    enum RetryPhase: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// While `shouldRetry` waits for the executor.
        case shouldRetryPending
        /// While the retry waits out its backoff.
        case backoff

        var testDescription: String { rawValue }
    }

    /// Guarantees 9 and 15 (and 2): a cancelled retry never asks `shouldRetry` nor starts the
    /// work again, keeps none of the work's captures once `cancel()` returns, and finishes.
    ///
    /// A failure type without a cancellation error cannot decide the loop at `cancel()`: the loop
    /// drops its plan then, and finishes, as cancelled, with the last try's failure. (Found
    /// asking `shouldRetry` and starting the work again after `cancel()`, then pending for ever.)
    @Test(arguments: PlainSource.allCases, RetryPhase.allCases)
    func aCancelledRetryOfAPlainFailureTypeNeverStartsTheWorkAgainAndFinishes(
        _ source: PlainSource, _ phase: RetryPhase
    ) {
        let clock = VirtualTimeExecutor()
        defer { clock.runUntilIdle() }
        let live = LiveCount()
        let starts = Counter()
        let asked = Counter()
        let handled = Counter()
        let retrying: Attempt<Int, Plain> = {
            let tracked = LifetimeTracked(live)
            return Attempt.retry(
                attempts: 3, delay: .seconds(1), upon: clock,
                while: { _ in
                    _ = tracked
                    asked.increment()
                    return true
                }
            ) {
                _ = tracked
                starts.increment()
                return source.start()
            }
        }()
        retrying.upon(.immediate) { _ in handled.increment() }
        if phase == .backoff {
            clock.advance(by: .zero)  // Runs the hop: shouldRetry says yes, the backoff starts.
        }
        let askedBefore = asked.value
        retrying.cancel()
        #expect(live.value == 0, "cancel() returned: nothing keeps the work's captures")
        clock.runUntilIdle()
        #expect(starts.value == 1, "the work never started again after cancel() returned")
        #expect(asked.value == askedBefore, "shouldRetry never ran after cancel() returned")
        #expect(handled.value == 1, "the cancelled loop finished and delivered once")
        #expect(retrying.isCancelled)
    }

    /// Guarantee 15 for the new hop: a cancelled retry must keep nothing of its failed try.
    ///
    /// (Found keeping the failed try's error in the body that would ask `shouldRetry`, until the
    /// executor ran it, however late.)
    @Test func aPendingShouldRetryHopKeepsNothingOfTheFailedTryAfterCancel() {
        let clock = VirtualTimeExecutor()
        defer { clock.runUntilIdle() }
        let live = LiveCount()
        let retrying = Attempt<Int, any Error>.retry(attempts: 3, upon: clock) {
            Attempt(failedWith: TrackedError(tracked: LifetimeTracked(live)))
        }
        #expect(clock.hasPendingWork, "shouldRetry waits for the executor")
        retrying.cancel()
        #expect(
            retrying.peek().map { if case .failure(let error) = $0 { error is CancellationError } else { false } }
                == true)
        #expect(live.value == 0, "the cancelled retry keeps nothing of the failed try")
    }

    /// How the consumers of a typed retry give it up while its `shouldRetry` waits.
    enum GivingUp: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case cancelTheRetry, cancelAStageAfterIt, cancelATaskAwaitingIt
        var testDescription: String { rawValue }
    }

    /// Guarantees 9, 13, 15 and 16 with the hop pending: once the retry is cancelled, or its only
    /// consumer gives up, the work's captures are gone, and when the executor runs the hop it
    /// neither asks `shouldRetry` nor starts the work again.
    @Test(arguments: GivingUp.allCases)
    func aTypedRetryGivenUpWhileShouldRetryWaitsKeepsNothingAndNeverAsks(_ givingUp: GivingUp) async {
        let clock = VirtualTimeExecutor()
        let live = LiveCount()
        let starts = Counter()
        let asked = Counter()
        let retrying: Attempt<Int, TestError> = {
            let tracked = LifetimeTracked(live)
            return Attempt.retry(
                attempts: 3, upon: clock,
                while: { _ in
                    _ = tracked
                    asked.increment()
                    return true
                }
            ) {
                _ = tracked
                starts.increment()
                return Attempt(failedWith: .failed(starts.value))
            }
        }()
        #expect(clock.hasPendingWork && live.value == 1, "the first try failed; shouldRetry waits")
        switch givingUp {
        case .cancelTheRetry:
            retrying.cancel()
            #expect(retrying.peek() == .failure(.cancelled))
        case .cancelAStageAfterIt:
            let stage = retrying.map(upon: .immediate) { $0 + 1 }
            stage.cancel()
            #expect(retrying.isCancelled, "nothing else needed the retry")
        case .cancelATaskAwaitingIt:
            // The reader runs on `steps`, so the test knows when it has reached its `get()`.
            let steps = ManualExecutor()
            let reader = Task(executorPreference: steps) { () async throws(TestError) -> Int in try await retrying.get()
            }
            steps.runUntilIdle()
            reader.cancel()
            steps.runUntilIdle()
            #expect(await failure(of: reader) == .cancelled)
            #expect(retrying.isCancelled, "the only reader gave up")
        }
        #expect(live.value == 0, "the work's captures went with the cancellation")
        #expect(clock.runUntilIdle() == 1, "only the hop ran, and it did nothing")
        #expect(asked.value == 0 && starts.value == 1)
    }

    /// Where a retry's own closure cancels it.
    enum CancelledFrom: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case shouldRetry, theSecondStart
        var testDescription: String { rawValue }
    }

    /// A retry cancelled from inside its own `shouldRetry` (now a body of the executor) or its own
    /// `start`: the loop ends cancelled, starts nothing more, and keeps none of the work.
    @Test(arguments: CancelledFrom.allCases)
    func aRetryCancelledFromItsOwnClosureStopsThere(_ place: CancelledFrom) {
        let clock = VirtualTimeExecutor()
        let live = LiveCount()
        let starts = Counter()
        let itself = Deferred<Attempt<Int, TestError>>()
        let retrying: Attempt<Int, TestError> = {
            let tracked = LifetimeTracked(live)
            return Attempt.retry(
                attempts: 4, upon: clock,
                while: { _ in
                    _ = tracked
                    if place == .shouldRetry {
                        itself.peek()?.cancel()
                    }
                    return true
                }
            ) {
                _ = tracked
                if starts.increment() == 1, place == .theSecondStart {
                    itself.peek()?.cancel()
                }
                return Attempt(failedWith: .failed(starts.value))
            }
        }()
        itself.fill(with: retrying)
        clock.runUntilIdle()
        #expect(retrying.peek() == .failure(.cancelled))
        #expect(starts.value == (place == .shouldRetry ? 1 : 2))
        #expect(live.value == 0)
    }

    /// Where the race below cancels.
    enum CancelTarget: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case theRetry, itsOnlyStage
        var testDescription: String { rawValue }
    }

    /// The state of a race of a retry's first failure against its cancellation on its queue.
    final class RetryRound: Sendable {
        let queue = DispatchQueue(label: "retry")
        let first = HeldWriter<Int, TestError>()
        let firstStopped = Counter()
        let live = LiveCount()
        let starts = Counter()
        let asked = Counter()
        let cancelReturned = Counter()
        /// shouldRetry calls and starts that began after `cancel()` returned.
        let lateSteps = Counter()
        /// Cancels after which the work's captures were still alive.
        let keptAfterCancel = Counter()
        let delivered = Counter()
        let finished = DispatchSemaphore(value: 0)
        let retrying: Attempt<Int, TestError>
        let target: Attempt<Int, TestError>

        init(cancelling: CancelTarget) {
            first.onCancel { [firstStopped] in firstStopped.increment() }
            let (first, starts, asked, cancelReturned, lateSteps) = (first, starts, asked, cancelReturned, lateSteps)
            let tracked = LifetimeTracked(live)
            let shouldRetry: @Sendable (TestError) -> Bool = { _ in
                _ = tracked
                if cancelReturned.value > 0 {
                    lateSteps.increment()
                }
                asked.increment()
                return true
            }
            let start: @Sendable () -> Attempt<Int, TestError> = {
                _ = tracked
                if cancelReturned.value > 0 {
                    lateSteps.increment()
                }
                return starts.increment() == 0 ? first.attempt : Attempt(failedWith: .failed(2))
            }
            retrying = Attempt.retry(attempts: 2, upon: queue, while: shouldRetry, start)
            target = cancelling == .theRetry ? retrying : retrying.map(upon: .immediate) { $0 }
            target.upon(.immediate) { [delivered, finished] _ in
                delivered.increment()
                finished.signal()
            }
        }

        func cancelOnTheQueue() {
            queue.sync {
                target.cancel()
                cancelReturned.increment()
                if live.value != 0 {
                    keptAfterCancel.increment()
                }
            }
        }
    }

    /// Guarantees 9, 12, 15 and 2 for the hop, under a real race.
    ///
    /// The first try fails on one thread while the retry (or its only stage) is cancelled on the retry's queue, where `shouldRetry` and the retries
    /// run. Whatever the order, neither starts after `cancel()` returned, the work's captures are
    /// gone when it returns, and the handler runs exactly once.
    @Test(arguments: CancelTarget.allCases)
    func aRetrysFirstFailureRacingItsCancelNeverAsksOrStartsAfterCancelReturns(_ cancelling: CancelTarget) {
        RaceHarness.expectInterleavings(
            "retry's first failure against cancel of \(cancelling)",
            rounds: TestSize.attack.raceRounds / 2,
            expected: [
                "cancelled before the failure", "cancelled while shouldRetry waited", "cancelled after shouldRetry",
            ],
            setup: { RetryRound(cancelling: cancelling) },
            left: { $0.first.fail(with: .failed(1)) },
            right: { $0.cancelOnTheQueue() },
            classify: { round in
                #expect(round.finished.wait(timeout: .now() + 10) == .success, "the target finished")
                round.queue.sync {}
                #expect(round.lateSteps.value == 0, "shouldRetry or a start began after cancel() returned")
                #expect(round.keptAfterCancel.value == 0, "the work's captures outlived cancel()")
                #expect(round.delivered.value == 1)
                #expect(round.target.isCancelled)
                #expect(round.starts.value <= 2 && round.asked.value <= 1)
                let firstResult = round.first.peek()
                #expect(round.firstStopped.value == (firstResult == .failure(.cancelled) ? 1 : 0))
                if round.retrying.peek() == .failure(.failed(2)) {
                    #expect(round.starts.value == 2 && round.asked.value == 1)
                }
                if firstResult == .failure(.cancelled) {
                    #expect(round.asked.value == 0 && round.starts.value == 1)
                    return "cancelled before the failure"
                }
                #expect(firstResult == .failure(.failed(1)))
                return round.asked.value == 0 ? "cancelled while shouldRetry waited" : "cancelled after shouldRetry"
            })
    }

    /// Guarantee 4 for a long retry loop on a scheduling executor of the library: every hop and
    /// every timer is a body of its own, so `depth` tries run in a loop, not a recursion; each is
    /// asked about once, the last failure wins, and the work's captures go at the end.
    @Test(.skippedUnderThreadSanitizer)
    func aLongRetryLoopOnVirtualTimeRunsEveryTryWithoutRecursion() async {
        let depth = Self.depth
        let live = LiveCount()
        let (result, starts, asked, bodies) = await onDeepStack(
            "retry of \(depth) tries on virtual time", size: .attack
        ) {
            let clock = VirtualTimeExecutor()
            let starts = Counter()
            let asked = Counter()
            let retrying: Attempt<Int, TestError> = {
                let tracked = LifetimeTracked(live)
                return Attempt.retry(
                    attempts: depth, delay: .milliseconds(1), upon: clock, backoff: .exponential(maximum: .seconds(1)),
                    while: { _ in
                        _ = tracked
                        asked.increment()
                        return true
                    }
                ) {
                    _ = tracked
                    return Attempt(failedWith: .failed(starts.increment() + 1))
                }
            }()
            let bodies = clock.runUntilIdle()
            return (retrying.peek(), starts.value, asked.value, bodies)
        }
        #expect(result == .failure(.failed(depth)))
        #expect(starts == depth && asked == depth - 1)
        #expect(bodies == 2 * (depth - 1), "one hop and one timer a retry")
        #expect(live.value == 0)
    }
}

// MARK: - DeferredAttemptBox

extension StressSuites.PlainFailureAndRetryAttackTests {
    /// The state of a race on a box kept in a slot.
    final class BoxRound: Sendable {
        let slot: BoxSlot<Int, any Error>
        let attempt: Attempt<Int, any Error>
        let live = LiveCount()
        let stopped = Counter()
        let delivered = Counter()
        let failures = Counter()
        let leftGotIt = Counter()
        let rightGotIt = Counter()

        /// A box in a slot; `dropOnCancel` makes the producer's cancel handler drop the box from
        /// the slot, with the writer still in it if nobody took it.
        init(dropOnCancel: Bool) {
            let slot = BoxSlot<Int, any Error>()
            self.slot = slot
            let writer = DeferredAttempt<Int, any Error>()
            writer.onCancel { [stopped] in
                stopped.increment()
                if dropOnCancel {
                    _ = slot.remove()
                }
            }
            let box = DeferredAttemptBox(writer)
            attempt = box.attempt
            slot.set(box)
            let tracked = LifetimeTracked(live)
            attempt.upon(.immediate) { [delivered] _ in
                _ = tracked
                delivered.increment()
            }
            attempt.uponFailure(.immediate) { [failures] _ in failures.increment() }
        }

        var isAbandoned: Bool {
            if case .failure(let error) = attempt.peek() { error is AbandonedError } else { false }
        }

        var isCancellation: Bool {
            if case .failure(let error) = attempt.peek() { error is CancellationError } else { false }
        }
    }

    /// A reply and `close()` race for the box of one request: exactly one of them removes it; the
    /// reply succeeds, or the box released with its writer abandons the attempt, once; nobody
    /// cancelled, and the handler and its captures are released after it ran.
    @Test func aReplyRacingCloseForABoxFinishesTheAttemptOnceAndAbandonsOnlyWhenClosedFirst() {
        RaceHarness.expectInterleavings(
            "reply against close of a box",
            rounds: TestSize.attack.raceRounds,
            expected: ["replied", "closed"],
            setup: { BoxRound(dropOnCancel: false) },
            left: { round in
                if let box = round.slot.remove() {
                    round.leftGotIt.increment()
                    box.take()?.succeed(with: 1)
                }
            },
            right: { round in
                if round.slot.remove() != nil {  // Released here, writer and all.
                    round.rightGotIt.increment()
                }
            },
            classify: { round in
                #expect(round.leftGotIt.value + round.rightGotIt.value == 1)
                #expect(round.delivered.value == 1)
                #expect(round.live.value == 0, "the handler's captures were released after it ran")
                #expect(round.stopped.value == 0, "nobody cancelled")
                if round.leftGotIt.value == 1 {
                    #expect(round.attempt.peek().flatMap { try? $0.get() } == 1)
                    return "replied"
                }
                #expect(round.isAbandoned)
                #expect(round.failures.value == 1)
                return "closed"
            })
    }

    /// `take()` and `succeed` against `cancel()`, where the cancel handler drops the box from its
    /// slot (writer and all, if not taken): one decision, the cancel handler runs only if the
    /// cancellation won, and the writer released inside it never abandons the cancelled attempt.
    @Test func aTakeRacingACancelWhoseHandlerDropsTheBoxDecidesOnceAndNeverAbandons() {
        RaceHarness.expectInterleavings(
            "take and succeed against cancel that drops the box",
            rounds: TestSize.attack.raceRounds,
            expected: ["succeeded first", "cancelled first"],
            setup: { BoxRound(dropOnCancel: true) },
            left: { round in
                if let writer = round.slot.get()?.take() {
                    round.leftGotIt.increment()
                    writer.succeed(with: 1)
                }
            },
            right: { $0.attempt.cancel() },
            classify: { round in
                _ = round.slot.remove()  // Whatever is left.
                #expect(round.delivered.value == 1)
                #expect(round.live.value == 0)
                #expect(round.failures.value == 0, "a cancellation is not a failure to report")
                #expect(round.attempt.isCancelled)
                #expect(!round.isAbandoned, "a writer released after the cancellation abandons nothing")
                if round.attempt.peek().flatMap({ try? $0.get() }) == 1 {
                    #expect(round.stopped.value == 0)
                    return "succeeded first"
                }
                #expect(round.isCancellation)
                #expect(round.stopped.value == 1)
                return "cancelled first"
            })
    }

    /// Releasing a box with its writer against `cancel()`: abandoned or cancelled, once; the cancel
    /// handler runs only for a cancellation; the handler runs once and is released.
    @Test func releasingABoxRacingACancelAbandonsOrCancelsExactlyOnce() {
        RaceHarness.expectInterleavings(
            "release of a full box against cancel",
            rounds: TestSize.attack.raceRounds,
            expected: ["abandoned first", "cancelled first"],
            setup: { BoxRound(dropOnCancel: false) },
            left: { _ = $0.slot.remove() },
            right: { $0.attempt.cancel() },
            classify: { round in
                #expect(round.delivered.value == 1)
                #expect(round.live.value == 0)
                #expect(round.failures.value <= 1)
                #expect(round.attempt.isCancelled)
                if round.isAbandoned {
                    #expect(round.stopped.value == 0, "nobody cancelled a pending attempt")
                    return "abandoned first"
                }
                #expect(round.isCancellation)
                #expect(round.stopped.value == 1)
                #expect(round.failures.value == 0)
                return "cancelled first"
            })
    }

    /// Exactly one of many threads taking from one box gets the writer, and `isEmpty` agrees.
    @Test func manyThreadsTakingFromOneBoxHandTheWriterToExactlyOne() {
        for _ in 0..<200 {
            let box = DeferredAttemptBox(DeferredAttempt<Int, TestError>())
            let winners = Counter()
            DispatchQueue.concurrentPerform(iterations: 8) { index in
                if let writer = box.take() {
                    winners.increment()
                    writer.succeed(with: index)
                }
            }
            #expect(winners.value == 1)
            #expect(box.isEmpty)
            #expect(box.attempt.peek().flatMap { try? $0.get() } != nil)
        }
    }

    /// Guarantee 17 for a box of a failure type that cannot say "abandoned": the attempt stays
    /// pending, but once the box and every attempt are gone, the dead chain is released with the
    /// captures of its stages and handlers.
    @Test func aReleasedBoxOfAWriterThatCannotSayAbandonedReleasesItsDeadChain() {
        let live = LiveCount()
        let delivered = Counter()
        do {
            let box = DeferredAttemptBox(DeferredAttempt<Int, TestError>())
            let tracked = LifetimeTracked(live)
            let mapped = box.attempt.map(upon: .immediate) { value in
                _ = tracked
                return value
            }
            mapped.upon(.immediate) { _ in
                _ = tracked
                delivered.increment()
            }
            box.attempt.uponFailure(DispatchQueue.global()) { _ in _ = tracked }
            #expect(live.value == 1)
        }
        #expect(live.value == 0, "nothing can decide the chain: it is released, handlers unrun")
        #expect(delivered.value == 0)
    }
}

// MARK: - uponMainActor

extension StressSuites.PlainFailureAndRetryAttackTests {
    /// Derived attempts of every kind, seen as `any FutureProtocol`: each withdraws its main-actor
    /// delivery when it is cancelled before the delivery starts, including a plain `mapError`
    /// without a cancellation error, which finishes later with a failure.
    @MainActor
    @Test func derivedAttemptsWithdrawTheirMainActorDeliveryThroughAnyFutureProtocol() async {
        let clock = VirtualTimeExecutor()
        let writer = DeferredAttempt<Int, TestError>()
        let source = writer.attempt
        let delivered = Counter()
        let typed: [Attempt<Int, TestError>] = [
            source.map(upon: .immediate) { $0 + 1 },
            source.mapError(upon: .immediate) { $0 },
            source.andThen(upon: .immediate) { Attempt(succeededWith: $0) },
            source.timeout(after: .seconds(10), upon: clock, failingWith: .timedOut),
            Attempt.retry(attempts: 2, upon: clock) { source },
        ]
        let plainStage = source.mapError(upon: .immediate, transform: plain)
        let futures: [any FutureProtocol<Result<Int, TestError>>] = typed
        for future in futures {
            future.uponMainActor { _ in delivered.increment() }
        }
        let erasedPlain: any FutureProtocol<Result<Int, Plain>> = plainStage
        erasedPlain.uponMainActor { _ in delivered.increment() }
        writer.fail(with: .failed(3))  // Every delivery now waits for the main actor, which this test holds.
        clock.runUntilIdle()
        for attempt in typed {
            attempt.cancel()
        }
        plainStage.cancel()
        await flushMainActor()
        #expect(delivered.value == 0, "cancel() withdrew every stale result")
        #expect(plainStage.peek() == .failure(Plain(code: 3)), "the plain stage finished with its failure")
    }

    /// Generic code over `some FutureProtocol` gets every value of futures that are not attempts,
    /// and the default stays a default: views of a `Deferred` deliver.
    @MainActor
    @Test func genericMainActorDeliveriesOfPlainFuturesAndViewsArriveOnce() async {
        func deliver(_ future: some FutureProtocol<Int>, _ delivered: Counter) {
            future.uponMainActor { _ in delivered.increment() }
        }
        let deferred = Deferred<Int>()
        let delivered = Counter()
        deliver(deferred, delivered)
        deliver(Future(deferred), delivered)
        deliver(deferred.lazy.map { $0 + 1 }, delivered)
        deliver(deferred.map(upon: .immediate) { $0 * 2 }, delivered)
        deferred.fill(with: 1)
        await flushMainActor()
        #expect(delivered.value == 4)
    }
}

// MARK: - Blocking waits in tasks

extension StressSuites.PlainFailureAndRetryAttackTests {
    /// Blocking waits of every form and kind, from a task's thread.
    ///
    /// Values that come later, values already there, and timeouts; returns what each saw, in a
    /// fixed order.
    static func waitInEveryForm() -> [Int?] {
        let later = Deferred<Int>()
        let writer = HeldWriter<Int, TestError>()
        // A thread of its own: a global queue's body could wait for a thread while the tasks block
        // them all, which is what the warning is about.
        Thread {
            usleep(5_000)
            later.fill(with: 1)
            writer.succeed(with: 2)
        }.start()
        let custom = CountingFuture(base: later)
        let pendingAttempt = HeldWriter<Int, TestError>()
        let results: [Int?] = [
            later.wait(for: .seconds(10)),
            Future(later).wait(until: ContinuousClock.now + .seconds(10)),
            writer.attempt.wait(until: .now() + 10).flatMap { try? $0.get() },
            custom.wait(for: .seconds(10)),
            Deferred<Int>(filledWith: 5).wait(for: .seconds(10)),
            Future<Int>.never.wait(for: .milliseconds(2)),
            Deferred<Int>().wait(until: .now() + .milliseconds(2)),
            pendingAttempt.attempt.wait(for: .milliseconds(2)).flatMap { try? $0.get() },
        ]
        pendingAttempt.succeed(with: 0)
        return results
    }

    /// A blocking wait, from synchronous code.
    static func waitBriefly(
        on attempt: Attempt<Int, TestError>, for timeout: Duration = .milliseconds(2)
    ) -> Result<Int, TestError>? {
        attempt.wait(for: timeout)
    }

    /// The debug warning of a blocking wait in a task changes nothing: many tasks blocking at the
    /// same call sites at once (the warning's lock is taken by all of them), and a wait inside a
    /// body of a serial queue that a task waits on, all return what a wait anywhere returns, and
    /// a timed-out wait on an attempt cancels nothing (guarantee 13).
    @Test func blockingWaitsFromManyTasksAtOnceReturnTheirValuesWithoutDeadlock() async {
        let expected: [Int?] = [1, 1, 2, 1, 5, nil, nil, nil]
        await withTaskGroup(of: [Int?].self) { group in
            for _ in 0..<8 {
                group.addTask { Self.waitInEveryForm() }
            }
            for await results in group {
                #expect(results == expected)
            }
        }
        let queue = DispatchQueue(label: "waits inside a queue")
        let fromQueue = await Task.detached { queue.sync { Self.waitInEveryForm() } }.value
        #expect(fromQueue == expected)
        let producer = HeldWriter<Int, TestError>()
        let stopped = Counter()
        producer.onCancel { stopped.increment() }
        let timedOut = await Task.detached { Self.waitBriefly(on: producer.attempt) == nil }.value
        #expect(timedOut)
        #expect(stopped.value == 0 && !producer.isCancelled, "a wait that timed out cancels nothing")
        producer.succeed(with: 7)
        #expect(await Task.detached { Self.waitBriefly(on: producer.attempt, for: .seconds(10)) }.value == .success(7))
    }
}
