import Deferred
import Dispatch
import TestSupport
import Testing

@Suite struct AttemptTests {
    @Test func theWriterCompletesTheAttemptOnce() {
        let writer = DeferredAttempt<Int, TestError>()
        let attempt = writer.attempt
        #expect(attempt.peek() == nil)
        #expect(attempt.isFilled == false)
        #expect(writer.succeed(with: 3) == true)
        #expect(writer.fail(with: .failed(1)) == false)
        #expect(writer.fill(with: .success(4)) == false)
        #expect(attempt.peek() == .success(3))
        #expect(writer.isFilled == true)
        #expect(attempt.isCancelled == false)
    }

    @Test func aWriterCanFailOrFillWithAResult() {
        let failing = DeferredAttempt<Int, TestError>()
        failing.fail(with: .failed(7))
        #expect(failing.peek() == .failure(.failed(7)))
        let filled = DeferredAttempt<Int, TestError>()
        filled.fill(with: .success(1))
        #expect(filled.attempt.peek() == .success(1))
    }

    @Test func attemptsCanBeMadeFinished() {
        #expect(Attempt<Int, TestError>(succeededWith: 1).peek() == .success(1))
        #expect(Attempt<Int, TestError>(failedWith: .failed(2)).peek() == .failure(.failed(2)))
        #expect(Attempt<Int, TestError>(filledWith: .success(3)).peek() == .success(3))
        let finished = Attempt<Int, TestError>(succeededWith: 1)
        finished.cancel()
        #expect(finished.peek() == .success(1), "cancelling a finished attempt does nothing")
    }

    @Test func successAndFailureHandlersRunForTheirOutcomeOnly() {
        let writer = DeferredAttempt<Int, TestError>()
        let successes = Counter()
        let failures = Counter()
        writer.attempt.uponSuccess(.immediate) { _ in successes.increment() }
        writer.attempt.uponFailure(.immediate) { _ in failures.increment() }
        writer.succeed(with: 1)
        #expect(successes.value == 1)
        #expect(failures.value == 0)
        let failed = Attempt<Int, TestError>(failedWith: .failed(1))
        failed.uponSuccess(.immediate) { _ in successes.increment() }
        failed.uponFailure(.immediate) { _ in failures.increment() }
        #expect(successes.value == 1)
        #expect(failures.value == 1)
    }

    @Test func everyCoreFutureAPIWorksOnAttempts() async {
        let writer = DeferredAttempt<Int, TestError>()
        let attempt = writer.attempt
        let doubled = attempt.lazy.map { (try? $0.get()).map { $0 * 2 } }
        let done = attempt.ignored()
        let both = [attempt, Attempt(succeededWith: 5)].allFilled()
        writer.succeed(with: 4)
        #expect(doubled.peek() == 8)
        #expect(done.isFilled == true)
        #expect(both.peek() == [.success(4), .success(5)])
        #expect(await attempt.value == .success(4))
    }

    @Test func asyncRunsTheWorkOnTheExecutor() {
        let succeeded = Attempt<Int, TestError>(upon: .global()) { 6 }
        #expect(succeeded.value() == .success(6))
        let failed = Attempt<Int, TestError>(upon: .global()) { () throws(TestError) -> Int in
            throw .failed(4)
        }
        #expect(failed.value() == .failure(.failed(4)))
    }

    @Test func cancellingBeforeTheWorkStartsMeansItNeverRuns() {
        let held = DispatchQueue(label: "held")
        held.suspend()
        let ran = Counter()
        let attempt = Attempt<Int, TestError>(upon: held) {
            ran.increment()
            return 1
        }
        attempt.cancel()
        held.resume()
        held.flush()
        #expect(ran.value == 0)
        #expect(attempt.peek() == .failure(.cancelled))
    }

    @Test func anAttemptFromAsyncWorkFinishesWithItsResult() async {
        let succeeded = Attempt<Int, TestError> { 5 }
        #expect(await succeeded.value == .success(5))
        let failed = Attempt<Int, TestError> { () async throws(TestError) -> Int in throw .failed(3) }
        #expect(await failed.value == .failure(.failed(3)))
    }

    @Test func cancellingAnAttemptFromAsyncWorkCancelsItsTask() async {
        let sawCancellation = Deferred<Bool>()
        let attempt = Attempt<Int, TestError> { () async throws(TestError) -> Int in
            do {
                try await Task.sleep(for: .seconds(60))
            } catch {
                sawCancellation.fill(with: Task.isCancelled)
                throw .failed(0)
            }
            return 1
        }
        try? await Task.sleep(for: .milliseconds(10))
        attempt.cancel()
        #expect(await sawCancellation.value)
        #expect(attempt.peek() == .failure(.cancelled), "the task's late failure changes nothing")
    }
}

@Suite struct AttemptCancellationTests {
    @Test func cancellingFailsWithTheCancellationErrorAndRunsTheHandlerOnce() {
        let writer = DeferredAttempt<Int, TestError>()
        let stopped = Counter()
        writer.onCancel { stopped.increment() }
        writer.attempt.cancel()
        writer.attempt.cancel()
        #expect(writer.peek() == .failure(.cancelled))
        #expect(writer.isCancelled == true)
        #expect(writer.attempt.isCancelled == true)
        #expect(stopped.value == 1)
        #expect(writer.succeed(with: 1) == false, "the work's late result changes nothing")
        #expect(writer.peek() == .failure(.cancelled))
    }

    @Test func aHandlerRegisteredAfterTheCancelRunsAtOnce() {
        let writer = DeferredAttempt<Int, TestError>()
        writer.attempt.cancel()
        let stopped = Counter()
        writer.onCancel { stopped.increment() }
        #expect(stopped.value == 1)
    }

    @Test func cancellingAfterCompletionKeepsTheResultAndReleasesTheHandlers() {
        let writer = DeferredAttempt<Int, TestError>()
        let live = LiveCount()
        let stopped = Counter()
        do {
            let tracked = LifetimeTracked(live)
            writer.onCancel {
                _ = tracked
                stopped.increment()
            }
        }
        writer.succeed(with: 1)
        #expect(live.value == 0, "the cancel handler was released on completion")
        writer.attempt.cancel()
        #expect(stopped.value == 0)
        #expect(writer.peek() == .success(1), "the decided result never changes")
        #expect(writer.attempt.isCancelled == true, "the success is withdrawn from its callbacks")
    }

    @Test func cancellingADerivedAttemptCancelsItsSourceWhenNothingElseNeedsIt() {
        let writer = DeferredAttempt<Int, TestError>()
        let stopped = Counter()
        writer.onCancel { stopped.increment() }
        let first = writer.attempt.map(upon: .immediate) { $0 + 1 }
        let second = writer.attempt.map(upon: .immediate) { $0 + 2 }
        first.cancel()
        #expect(first.peek() == .failure(.cancelled))
        #expect(stopped.value == 0, "the second still needs the source")
        second.cancel()
        #expect(stopped.value == 1, "now nothing needs it")
        #expect(writer.peek() == .failure(.cancelled))
    }

    @Test func aHandlerOnTheSourceKeepsItAlive() {
        let writer = DeferredAttempt<Int, TestError>()
        let stopped = Counter()
        writer.onCancel { stopped.increment() }
        writer.attempt.uponSuccess(.immediate) { _ in }
        let derived = writer.attempt.map(upon: .immediate) { $0 }
        derived.cancel()
        #expect(stopped.value == 0)
        #expect(writer.succeed(with: 1) == true)
    }

    @Test func cancellingTheSourceFailsEveryDerivedAttempt() {
        let writer = DeferredAttempt<Int, TestError>()
        let mapped = writer.attempt.map(upon: .immediate) { $0 * 2 }
        let chained = mapped.andThen(upon: .immediate) { Attempt(succeededWith: $0 + 1) }
        writer.attempt.cancel()
        #expect(mapped.peek() == .failure(.cancelled))
        #expect(chained.peek() == .failure(.cancelled))
    }

    @Test func cancellingAnAndThenCancelsTheStepItWaitsFor() {
        let first = DeferredAttempt<Int, TestError>()
        let second = DeferredAttempt<String, TestError>()
        let firstStopped = Counter()
        let secondStopped = Counter()
        first.onCancel { firstStopped.increment() }
        second.onCancel { secondStopped.increment() }
        let chained = first.attempt.andThen(upon: .immediate) { _ in second.attempt }
        first.succeed(with: 1)
        chained.cancel()
        #expect(firstStopped.value == 0, "the first step had finished")
        #expect(secondStopped.value == 1, "the step in flight is cancelled")
        #expect(chained.peek() == .failure(.cancelled))
    }

    @Test func allSucceededCancelsTheRestWhenOneFails() {
        let writers = (0..<3).map { _ in HeldWriter<Int, TestError>() }
        let stopped = Counter()
        for writer in writers {
            writer.onCancel { stopped.increment() }
        }
        let all = writers.map(\.attempt).allSucceeded()
        writers[0].succeed(with: 0)
        writers[1].fail(with: .failed(1))
        #expect(all.peek() == .failure(.failed(1)))
        #expect(stopped.value == 1, "the one still running is cancelled")
        #expect(writers[2].isCancelled)
    }

    @Test func cancellingAllSucceededCancelsEveryInput() {
        let writers = (0..<3).map { _ in HeldWriter<Int, TestError>() }
        let all = writers.map(\.attempt).allSucceeded()
        all.cancel()
        let cancelled = writers.filter { $0.isCancelled }.count
        #expect(cancelled == 3)
    }

    @Test func firstSucceededCancelsTheOthersOnceOneSucceeds() {
        let writers = (0..<3).map { _ in HeldWriter<Int, TestError>() }
        let first = writers.map(\.attempt).firstSucceeded()
        writers[2].fail(with: .failed(2))
        #expect(first.peek() == nil, "one failure is not the end")
        writers[1].succeed(with: 1)
        #expect(first.peek() == .success(1))
        #expect(writers[0].isCancelled)
    }

    @Test func getThrowsTheTypedErrorAndCancelsTheWorkWhenItsTaskIsCancelled() async {
        let writer = DeferredAttempt<Int, TestError>()
        let stopped = Deferred<Void>()
        writer.onCancel { stopped.fill() }
        let reader = Task { () async throws(TestError) -> Int in try await writer.attempt.get() }
        try? await Task.sleep(for: .milliseconds(10))
        reader.cancel()
        #expect(await failure(of: reader) == .cancelled)
        await stopped.value
        #expect(writer.isCancelled == true, "nobody else needed the work")
    }

    @Test func aCancelledReaderLeavesWorkThatOthersNeed() async {
        let writer = DeferredAttempt<Int, TestError>()
        let other = writer.attempt.map(upon: .immediate) { $0 }
        let reader = Task { () async throws(TestError) -> Int in try await writer.attempt.get() }
        try? await Task.sleep(for: .milliseconds(10))
        reader.cancel()
        #expect(await failure(of: reader) == .cancelled)
        #expect(writer.isCancelled == false)
        writer.succeed(with: 2)
        #expect(other.peek() == .success(2))
    }

    @Test func timeoutFailsAndCancelsTheProducer() {
        let writer = DeferredAttempt<Int, TestError>()
        let stopped = Deferred<Void>()
        writer.onCancel { stopped.fill() }
        let limited = writer.attempt.timeout(
            after: .milliseconds(20), upon: DispatchQueue.global(), failingWith: .timedOut)
        #expect(limited.value() == .failure(.timedOut))
        #expect(stopped.value() != nil, "the producer was told to stop")
        #expect(writer.succeed(with: 1) == false)
    }

    @Test func aResultWithinTheTimeoutPassesThrough() {
        let writer = DeferredAttempt<Int, TestError>()
        let limited = writer.attempt.timeout(after: .seconds(30), upon: DispatchQueue.global(), failingWith: .timedOut)
        writer.succeed(with: 1)
        #expect(limited.peek() == .success(1))
    }

    @Test(.timeLimit(.minutes(2)))
    func cancelHandlersRunExactlyOnceWhenCancellingRacesCompleting() {
        final class Round: Sendable {
            let writer = DeferredAttempt<Int, TestError>()
            let stopped = Counter()
            let derived: Attempt<Int, TestError>

            init() {
                derived = writer.attempt.map(upon: .immediate) { $0 }
                writer.onCancel { [stopped] in stopped.increment() }
            }
        }
        RaceHarness.expectInterleavings(
            "cancel against succeed",
            expected: ["completed first", "cancelled first"],
            setup: Round.init,
            left: { $0.writer.succeed(with: 1) },
            right: { $0.derived.cancel() },
            classify: { round in
                switch round.writer.peek() {
                case .success:
                    #expect(round.stopped.value == 0)
                    return "completed first"
                default:
                    #expect(round.stopped.value == 1)
                    #expect(round.derived.peek() == .failure(.cancelled))
                    return "cancelled first"
                }
            }
        )
    }

    @Test(.timeLimit(.minutes(2)))
    func racingCancelsRunTheHandlerOnce() {
        final class Round: Sendable {
            let writer = DeferredAttempt<Int, TestError>()
            let stopped = Counter()
            let first = Counter()

            init() {
                writer.onCancel { [stopped] in stopped.increment() }
                writer.onCancel { [first] in first.increment() }
            }
        }
        RaceHarness.expectInterleavings(
            "cancel against cancel",
            expected: ["cancelled once"],
            setup: Round.init,
            left: { $0.writer.attempt.cancel() },
            right: { $0.writer.attempt.cancel() },
            classify: { round in
                #expect(round.stopped.value == 1)
                #expect(round.first.value == 1)
                return "cancelled once"
            }
        )
    }

    @Test func aCancelledChainIsReleased() {
        let live = LiveCount()
        do {
            let writer = DeferredAttempt<LifetimeTracked, TestError>()
            let tracked = LifetimeTracked(live)
            writer.onCancel { _ = tracked }
            let chained = writer.attempt
                .map(upon: .immediate) { $0 }
                .andThen(upon: .immediate) { Attempt(succeededWith: $0) }
                .recover(upon: .immediate) { _ in LifetimeTracked(live) }
            chained.cancel()
        }
        #expect(live.value == 0)
    }

    @Test func anAbandonedChainIsReleasedWithoutBeingCancelled() {
        let live = LiveCount()
        do {
            let writer = DeferredAttempt<Int, TestError>()
            let tracked = LifetimeTracked(live)
            writer.onCancel { _ = tracked }
            _ = writer.attempt.map(upon: .immediate) { $0 }.timeout(
                after: .seconds(60), upon: DispatchQueue.global(), failingWith: .timedOut)
        }
        #expect(live.value == 0, "no cycle keeps an unfinished chain alive")
    }

    /// A pending attempt that is dropped unfilled releases its success and failure callbacks
    /// and what they capture, on every executor kind, derived or not (guarantee 5).
    @Test(arguments: [false, true], [false, true])
    func anAbandonedAttemptReleasesItsCallbacks(onQueue: Bool, derived: Bool) {
        let live = LiveCount()
        let queue = DispatchQueue(label: "callbacks")
        do {
            let writer = DeferredAttempt<Int, TestError>()
            let attempt = derived ? writer.attempt.map(upon: .immediate) { $0 } : writer.attempt
            let success = LifetimeTracked(live)
            let failure = LifetimeTracked(live)
            if onQueue {
                attempt.uponSuccess(queue) { _ in _ = success }.uponFailure(queue) { _ in _ = failure }
            } else {
                attempt.uponSuccess(.immediate) { _ in _ = success }.uponFailure(.immediate) { _ in _ = failure }
            }
        }
        #expect(live.value == 0, "a callback must not keep its own attempt alive")
    }
}
