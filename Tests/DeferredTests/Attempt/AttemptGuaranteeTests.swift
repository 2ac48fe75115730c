import Deferred
import Dispatch
import Foundation
import TestSupport
import Testing

/// Guarantees 8–10 and 12 for every kind of derived attempt: cancellation reaches the producer,
/// a cancelled step never starts, deliveries are withdrawn, and `isCancelled` tells the truth.
@Suite struct AttemptGuaranteeTests {
    /// Work that nothing references but its cancel handler, which keeps the writer (as work
    /// that would still finish once told to stop does); the caller keeps only the attempt. (A
    /// writer released undecided would finish the attempt at once, abandoned or orphaned: see
    /// ``OrphanedAttemptTests``.)
    static func producer(counting stopped: Counter) -> Attempt<Int, TestError> {
        let writer = HeldWriter<Int, TestError>()
        writer.onCancel { [writer] in
            _ = writer
            stopped.increment()
        }
        return writer.attempt
    }

    @Test(arguments: AttemptKind.allCases)
    func cancelReachesAProducerThatKeptNoReference(_ kind: AttemptKind) {
        let stopped = Counter()
        let derived = kind.stage(after: Self.producer(counting: stopped), delayingOn: DispatchQueue(label: "delays"))
        #expect(stopped.value == 0)
        derived.cancel()
        #expect(stopped.value == 1)
        derived.cancel()
        #expect(stopped.value == 1, "exactly once")
        #expect(derived.peek() == .failure(.cancelled))
        #expect(derived.isCancelled == true)
    }

    @Test(arguments: AttemptKind.allCases)
    func cancelReachesTheProducerThroughAnAttemptWithHandlers(_ kind: AttemptKind) {
        let stopped = Counter()
        let delivered = Counter()
        let derived = kind.stage(after: Self.producer(counting: stopped), delayingOn: DispatchQueue(label: "delays"))
            .uponSuccess(.immediate) { _ in delivered.increment() }
        derived.cancel()
        #expect(stopped.value == 1, "the handler needs only this attempt, which was cancelled")
        #expect(delivered.value == 0)
    }

    @Test(arguments: AttemptKind.allCases)
    func aHandlerOnOneDerivedAttemptKeepsTheWorkForItWhenAnotherIsCancelled(_ kind: AttemptKind) {
        let writer = DeferredAttempt<Int, TestError>()
        let stopped = Counter()
        writer.onCancel { stopped.increment() }
        let queue = DispatchQueue(label: "delays")
        let kept = kind.stage(after: writer.attempt, delayingOn: queue)
        let delivered = Deferred<Int>()
        kept.uponSuccess(.immediate) { delivered.fill(with: $0) }
        kind.stage(after: writer.attempt, delayingOn: queue).cancel()
        #expect(stopped.value == 0)
        writer.succeed(with: 0)
        #expect(delivered.wait(until: .now() + 10) == kind.succeeded(depth: 1).successValue)
    }

    @Test func cancelReachesTheAttemptAStepStarted() {
        let stopped = Counter()
        let started = Counter()
        let andThen = Attempt<Int, TestError>(succeededWith: 1).andThen(upon: .immediate) { _ in
            started.increment()
            return Self.producer(counting: stopped)
        }
        let fallback = Attempt<Int, TestError>(failedWith: .failed(1)).fallback(upon: .immediate) { _ in
            started.increment()
            return Self.producer(counting: stopped)
        }
        #expect(started.value == 2)
        andThen.cancel()
        fallback.cancel()
        #expect(stopped.value == 2, "the inner attempts of andThen and fallback were cancelled")
    }

    @Test(arguments: AttemptKind.allCases)
    func anAttemptWhoseSourceWasCancelledSaysSo(_ kind: AttemptKind) {
        let writer = DeferredAttempt<Int, TestError>()
        let queue = DispatchQueue(label: "delays")
        let derived = kind.stage(after: writer.attempt, delayingOn: queue)
        writer.attempt.cancel()
        let result = derived.wait(until: .now() + 10)
        #expect(result == .failure(.cancelled))
        #expect(derived.isCancelled == true)
    }

    /// The kinds whose step runs on an executor of the caller's choice.
    enum Step: String, CaseIterable, CustomTestStringConvertible {
        case map, mapError, andThen, recover, fallback

        var testDescription: String { rawValue }

        /// The source result that makes the step run.
        var trigger: Result<Int, TestError> {
            switch self {
            case .map, .andThen: .success(1)
            case .mapError, .recover, .fallback: .failure(.failed(1))
            }
        }

        func derive(from source: Attempt<Int, TestError>, on queue: DispatchQueue, ran: Counter) -> Attempt<
            Int, TestError
        > {
            switch self {
            case .map:
                source.map(upon: queue) { value in
                    ran.increment()
                    return value
                }
            case .mapError:
                source.mapError(upon: queue) { error in
                    ran.increment()
                    return error
                }
            case .andThen:
                source.andThen(upon: queue) { value in
                    ran.increment()
                    return Attempt(succeededWith: value)
                }
            case .recover:
                source.recover(upon: queue) { _ in
                    ran.increment()
                    return 0
                }
            case .fallback:
                source.fallback(upon: queue) { _ in
                    ran.increment()
                    return Attempt(succeededWith: 0)
                }
            }
        }
    }

    @Test(arguments: Step.allCases)
    func aStepThatHasNotStartedWhenCancelReturnsNeverRuns(_ step: Step) {
        let writer = DeferredAttempt<Int, TestError>()
        let queue = DispatchQueue(label: "held")
        let ran = Counter()
        let derived = step.derive(from: writer.attempt, on: queue, ran: ran)
        queue.suspend()
        writer.fill(with: step.trigger)  // the step is now queued
        derived.cancel()
        queue.resume()
        queue.sync {}
        #expect(ran.value == 0)
        #expect(derived.peek() == .failure(.cancelled))
    }

    @Test func aRetryThatHasNotStartedWhenCancelReturnsNeverStarts() {
        let queue = DispatchQueue(label: "held")
        let starts = Counter()
        queue.suspend()
        let retrying = Attempt<Int, TestError>.retry(attempts: 4, upon: queue) {
            starts.increment()
            return Attempt(failedWith: .failed(1))
        }
        #expect(starts.value == 1, "the first attempt failed and the first retry is queued")
        retrying.cancel()
        queue.resume()
        queue.sync {}
        #expect(starts.value == 1, "no retry started after cancel() returned")
        #expect(retrying.peek() == .failure(.cancelled))
    }

    @Test func aDeliveryQueuedBeforeCancelIsWithdrawnEvenAfterSuccess() {
        let writer = DeferredAttempt<Int, TestError>()
        let queue = DispatchQueue(label: "screen")
        let delivered = Counter()
        let failures = Counter()
        writer.attempt
            .uponSuccess(queue) { _ in delivered.increment() }
            .uponFailure(queue) { _ in failures.increment() }
        queue.suspend()
        writer.succeed(with: 1)  // both deliveries are queued
        writer.attempt.cancel()
        queue.resume()
        queue.sync {}
        #expect(delivered.value == 0)
        #expect(failures.value == 0)
        #expect(writer.peek() == .success(1), "the decided result never changes")
        #expect(writer.attempt.isCancelled == true)
    }

    @Test func aCancellationReachesNoSuccessOrFailureCallback() {
        let writer = DeferredAttempt<Int, TestError>()
        let called = Counter()
        let all = Counter()
        writer.attempt
            .uponSuccess(.immediate) { _ in called.increment() }
            .uponFailure(.immediate) { _ in called.increment() }
            .upon(.immediate) { _ in all.increment() }
        writer.attempt.cancel()
        #expect(called.value == 0, "a cancellation is not a failure to report")
        #expect(all.value == 1, "upon still sees every result")
    }

    @Test func chainedCallbacksReturnTheAttempt() {
        let values = Counter()
        let attempt = Attempt<Int, TestError>(succeededWith: 2)
        let returned =
            attempt
            .uponSuccess(.immediate) { _ in values.increment() }
            .uponFailure(.immediate) { _ in Issue.record("no failure") }
        #expect(returned.peek() == .success(2))
        #expect(values.value == 1)
    }
}

/// Guarantee 11: any error type.
@Suite struct AttemptErrorTypeTests {
    struct PlainError: Error, Equatable {
        let code: Int
    }

    static func decode(_ text: String) throws -> Int {
        guard let value = Int(text) else {
            throw PlainError(code: 1)
        }
        return value
    }

    @Test func anyErrorAttemptsNeedNoAnnotationsAndCancelWithCancellationError() throws {
        let parsed = Attempt { try Self.decode("12") }
        #expect(try parsed.peek()?.get() == 12)
        let failed = Attempt(succeededWith: "x").map(upon: .immediate) { try Self.decode($0) }
        #expect((failed.peek()?.failureValue as? PlainError) == PlainError(code: 1))
        let writer = DeferredAttempt<Data, any Error>()
        writer.attempt.cancel()
        #expect(writer.peek()?.failureValue is CancellationError)
        #expect(writer.isCancelled == true)
    }

    @Test func aPlainErrorCancelsWithTheErrorTheWriterWasGiven() {
        let writer = DeferredAttempt<Int, PlainError>(cancellationError: PlainError(code: -1))
        let mapped = writer.attempt.map(upon: .immediate) { $0 + 1 }
        mapped.cancel()
        #expect(mapped.peek() == .failure(PlainError(code: -1)))
        #expect(writer.peek() == .failure(PlainError(code: -1)), "nothing else needed the work")
        #expect(mapped.isCancelled == true)
    }

    @Test func aPlainErrorWithoutACancellationErrorStillStopsTheProducerAndWithdraws() {
        let writer = DeferredAttempt<Int, PlainError>()
        let stopped = Counter()
        let delivered = Counter()
        writer.onCancel { stopped.increment() }
        writer.attempt.uponSuccess(.immediate) { _ in delivered.increment() }
        writer.attempt.cancel()
        #expect(stopped.value == 1, "the producer was told to stop")
        #expect(writer.peek() == nil, "there is no error to finish with; the producer's result decides")
        writer.succeed(with: 1)
        #expect(writer.peek() == .success(1))
        #expect(delivered.value == 0, "the success was withdrawn")
    }

    @Test func throwingCatchingWorkBecomesAnAttempt() async throws {
        let typed = Attempt<Int, TestError> { () throws(TestError) in throw .failed(3) }
        #expect(typed.peek() == .failure(.failed(3)))
        let asynchronous = Attempt { () async throws -> Int in
            try await Task.sleep(for: .milliseconds(1))
            return 4
        }
        #expect(try await asynchronous.get() == 4)
    }
}

/// The bridges between plain futures and attempts, and between attempts of different types.
@Suite struct AttemptBridgeTests {
    @Test func aFutureBecomesAnAttempt() {
        let deferred = Deferred<Int>()
        let attempt = Attempt<Int, TestError>(Future(deferred))
        deferred.fill(with: 5)
        #expect(attempt.peek() == .success(5))
    }

    @Test func aFutureOfAResultBecomesAnAttempt() {
        let deferred = Deferred<Result<Int, TestError>>()
        let attempt = Attempt(Future(deferred))
        deferred.fill(with: .failure(.failed(6)))
        #expect(attempt.peek() == .failure(.failed(6)))
    }

    @Test func andJoinsAttemptsOfDifferentTypesAndFailsFast() {
        let number = DeferredAttempt<Int, TestError>()
        let text = DeferredAttempt<String, TestError>()
        let stopped = Counter()
        text.onCancel { stopped.increment() }
        let both = number.attempt.and(text.attempt)
        number.fail(with: .failed(7))
        #expect(both.peek()?.failureValue == .failed(7), "the first failure in time, at once")
        #expect(stopped.value == 1, "the other attempt is cancelled")
        let joined = Attempt<Int, TestError>(succeededWith: 1).and(
            Attempt(succeededWith: "one"), Attempt(succeededWith: 1.5))
        #expect(joined.peek().map { (try? $0.get()).map { "\($0.0) \($0.1) \($0.2)" } } == "1 one 1.5")
    }
}

/// Seed 000: a future of synchronous work runs it elsewhere.
@Suite struct FutureOfWorkTests {
    @Test func synchronousWorkRunsOffTheCallersThread() {
        let mayFinish = DispatchSemaphore(value: 0)
        // If the work ran on this thread, it would wait for a signal this thread has not sent yet.
        let future = Future { mayFinish.wait(timeout: .now() + 10) == .success ? 1 : 0 }
        mayFinish.signal()
        #expect(future.wait(until: .now() + 10) == 1)
    }

    @Test func asynchronousWorkRunsInATask() async {
        let future = Future { () async -> Int in
            try? await Task.sleep(for: .milliseconds(1))
            return 2
        }
        #expect(await future.value == 2)
    }
}
