import Deferred
import DeferredExecutors
import Dispatch
import TestSupport
import Testing

@Suite struct AttemptTransformTests {
    @Test func mapTransformsASuccessAndPassesAFailureOn() {
        #expect(Attempt<Int, TestError>(succeededWith: 2).map(upon: .immediate) { $0 * 3 }.peek() == .success(6))
        #expect(
            Attempt<Int, TestError>(failedWith: .failed(1)).map(upon: .immediate) { $0 * 3 }.peek()
                == .failure(.failed(1))
        )
    }

    @Test func aThrowingTransformFailsTheAttemptWithItsTypedError() {
        let mapped = Attempt<Int, TestError>(succeededWith: 2).map(upon: .immediate) { value throws(TestError) -> Int in
            throw .failed(value)
        }
        #expect(mapped.peek() == .failure(.failed(2)))
    }

    @Test func mapRunsOnItsExecutorAfterTheSourceFinishes() {
        let writer = DeferredAttempt<Int, TestError>()
        let mapped = writer.attempt.map(upon: DispatchQueue.global()) { $0 + 1 }
        writer.succeed(with: 1)
        #expect(mapped.value() == .success(2))
    }

    @Test func mapErrorTranslatesTheFailure() {
        struct Wrapped: CancellableError, Equatable {
            let code: Int
            static var cancelled: Wrapped { Wrapped(code: -1) }
        }
        let failed = Attempt<Int, TestError>(failedWith: .failed(4)).mapError(upon: .immediate) { error in
            Wrapped(code: error == .failed(4) ? 4 : 0)
        }
        #expect(failed.peek() == .failure(Wrapped(code: 4)))
        #expect(
            Attempt<Int, TestError>(succeededWith: 1).mapError(upon: .immediate) { _ in Wrapped(code: 0) }.peek()
                == .success(1))
        let pending = DeferredAttempt<Int, TestError>()
        let translated = pending.attempt.mapError(upon: .immediate) { _ in Wrapped(code: 9) }
        translated.cancel()
        #expect(translated.peek() == .failure(.cancelled))
    }

    @Test func andThenContinuesWithTheNextAttempt() {
        let first = DeferredAttempt<Int, TestError>()
        let second = DeferredAttempt<String, TestError>()
        let chained = first.attempt.andThen(upon: .immediate) { _ in second.attempt }
        first.succeed(with: 1)
        #expect(chained.peek() == nil)
        second.succeed(with: "two")
        #expect(chained.peek() == .success("two"))
    }

    @Test func andThenStopsAtTheFirstFailure() {
        let started = Counter()
        let chained = Attempt<Int, TestError>(failedWith: .failed(1)).andThen(upon: .immediate) {
            value -> Attempt<Int, TestError> in
            started.increment()
            return Attempt(succeededWith: value)
        }
        #expect(chained.peek() == .failure(.failed(1)))
        #expect(started.value == 0)
        let throwing = Attempt<Int, TestError>(succeededWith: 1).andThen(upon: .immediate) {
            value throws(TestError) -> Attempt<Int, TestError> in
            throw .failed(value + 1)
        }
        #expect(throwing.peek() == .failure(.failed(2)))
    }

    @Test func typedErrorsTravelThroughAChain() async {
        let chained = Attempt<Int, TestError>(succeededWith: 1)
            .map(upon: .immediate) { $0 + 1 }
            .andThen(upon: .global()) { value throws(TestError) -> Attempt<Int, TestError> in
                guard value < 2 else { throw .failed(value) }
                return Attempt(succeededWith: value)
            }
            .map(upon: .immediate) { $0 * 100 }
        do throws(TestError) {
            _ = try await chained.get()
            Issue.record("the chain should have failed")
        } catch {
            #expect(error == .failed(2), "the error keeps its type and value through the chain")
        }
    }

    @Test func recoverTurnsAFailureIntoAValue() {
        let recovered = Attempt<Int, TestError>(failedWith: .failed(3)).recover(upon: .immediate) { error in
            error == .failed(3) ? 30 : 0
        }
        #expect(recovered.peek() == .success(30))
        #expect(Attempt<Int, TestError>(succeededWith: 1).recover(upon: .immediate) { _ in 0 }.peek() == .success(1))
        let rethrown = Attempt<Int, TestError>(failedWith: .failed(1)).recover(upon: .immediate) {
            error throws(TestError) -> Int in
            throw error
        }
        #expect(rethrown.peek() == .failure(.failed(1)))
    }

    @Test func fallbackTurnsAFailureIntoAnotherAttempt() {
        let mirror = DeferredAttempt<String, TestError>()
        let page = Attempt<String, TestError>(failedWith: .failed(404)).fallback(upon: .immediate) { _ in mirror.attempt
        }
        #expect(page.peek() == nil)
        mirror.succeed(with: "from the mirror")
        #expect(page.peek() == .success("from the mirror"))
        #expect(
            Attempt<String, TestError>(succeededWith: "primary").fallback(upon: .immediate) { _ in mirror.attempt }
                .peek()
                == .success("primary"))
    }

    @Test func allSucceededCollectsTheValuesInOrder() {
        let writers = (0..<4).map { _ in HeldWriter<Int, TestError>() }
        let all = writers.map(\.attempt).allSucceeded()
        for index in [2, 0, 3, 1] {
            #expect(all.peek() == nil)
            writers[index].succeed(with: index * 10)
        }
        #expect(all.peek() == .success([0, 10, 20, 30]))
        #expect([Attempt<Int, TestError>]().allSucceeded().peek() == .success([]))
    }

    @Test func firstSucceededFailsWithTheLastErrorWhenAllFail() {
        let writers = (0..<3).map { _ in HeldWriter<Int, TestError>() }
        let first = writers.map(\.attempt).firstSucceeded()
        writers[1].fail(with: .failed(1))
        writers[0].fail(with: .failed(0))
        #expect(first.peek() == nil)
        writers[2].fail(with: .failed(2))
        #expect(first.peek() == .failure(.failed(2)))
    }

    @Test func firstSucceededOfNoAttemptsWaitsUntilItIsCancelled() {
        let none = [Attempt<Int, TestError>]().firstSucceeded()
        #expect(none.peek() == nil, "no attempt can succeed first, and none failed")
        none.cancel()
        #expect(none.peek() == .failure(.cancelled))
    }

    @Test func getReturnsTheValueOrThrowsTheTypedError() async throws {
        #expect(try await Attempt<Int, TestError>(succeededWith: 1).get() == 1)
        do throws(TestError) {
            _ = try await Attempt<Int, TestError>(failedWith: .failed(5)).get()
        } catch {
            #expect(error == .failed(5))
        }
        let writer = DeferredAttempt<Int, TestError>()
        DispatchQueue.global().async { writer.succeed(with: 8) }
        #expect(try await writer.attempt.get() == 8)
    }
}

@Suite struct AttemptRetryTests {
    @Test func retryStopsAtTheFirstSuccess() {
        let tries = Counter()
        let result = Attempt<Int, TestError>.retry(attempts: 6, upon: DispatchQueue.global()) {
            let number = tries.increment()
            return number < 2 ? Attempt(failedWith: .failed(number)) : Attempt(succeededWith: number)
        }
        #expect(result.value() == .success(2))
        #expect(tries.value == 3)
    }

    /// `attempts` counts every start of the work, the first included.
    @Test(arguments: [1, 2, 3])
    func retryGivesUpWithTheLastFailureAfterItsAttempts(attempts: Int) {
        let tries = Counter()
        let result = Attempt<Int, TestError>.retry(attempts: attempts, upon: DispatchQueue.global()) {
            Attempt(failedWith: .failed(tries.increment()))
        }
        #expect(result.value() == .failure(.failed(attempts - 1)))
        #expect(tries.value == attempts, "the first start and \(attempts - 1) retries")
    }

    @Test func retryAsksWhetherAFailureIsWorthRetrying() {
        let tries = Counter()
        let worthRetrying: @Sendable (TestError) -> Bool = { $0 != .failed(1) }
        let result = Attempt<Int, TestError>.retry(attempts: 6, upon: DispatchQueue.global(), while: worthRetrying) {
            Attempt(failedWith: .failed(tries.increment()))
        }
        #expect(result.value() == .failure(.failed(1)))
        #expect(tries.value == 2)
    }

    @Test func cancellingARetryCancelsTheAttemptInFlightAndStops() {
        let writers = Deferred<HeldWriter<Int, TestError>>()
        let tries = Counter()
        let result = Attempt<Int, TestError>.retry(attempts: 6, upon: DispatchQueue.global()) {
            tries.increment()
            let writer = HeldWriter<Int, TestError>()
            writers.fill(with: writer)
            return writer.attempt
        }
        let inFlight = writers.value()
        result.cancel()
        #expect(inFlight?.isCancelled == true)
        #expect(result.peek() == .failure(.cancelled))
        #expect(tries.value == 1)
    }

    @Test func backoffDelaysGrow() {
        let base = Duration.milliseconds(100)
        #expect(RetryBackoff.constant.delay(after: base, forRetry: 3) == base)
        let exponential = RetryBackoff.exponential()
        #expect(exponential.delay(after: base, forRetry: 1) == .milliseconds(100))
        #expect(exponential.delay(after: base, forRetry: 2) == .milliseconds(200))
        #expect(exponential.delay(after: base, forRetry: 4) == .milliseconds(800))
        let capped = RetryBackoff.exponential(multiplier: 10, maximum: .seconds(1))
        #expect(capped.delay(after: base, forRetry: 5) == .seconds(1))
        let custom = RetryBackoff { base, retry in base * retry }
        #expect(custom.delay(after: base, forRetry: 3) == .milliseconds(300))
    }
}

/// An attempt of `any Error` needs no error of its own for a time limit.
@Suite struct AttemptDefaultTimeoutTests {
    @Test func aTimeoutWithoutAnErrorFailsWithATimeoutErrorNamingTheLimit() {
        let clock = VirtualTimeExecutor()
        let stopped = Counter()
        let writer = DeferredAttempt<Int, any Error>()
        writer.onCancel { stopped.increment() }
        let limited = writer.attempt.timeout(after: .milliseconds(1_500), upon: clock)
        clock.advance(by: .seconds(1))
        #expect(limited.peek() == nil)
        clock.advance(by: .seconds(1))
        guard case .failure(let error as TimeoutError) = limited.peek() else {
            Issue.record("expected a TimeoutError, got \(String(describing: limited.peek()))")
            return
        }
        #expect(error == TimeoutError(limit: .milliseconds(1_500)))
        #expect("\(error)" == "timed out after 1.5 seconds")
        #expect(stopped.value == 1, "the work was told to stop")
    }

    @Test func aTimeoutWithoutAnErrorPassesAResultInTimeOn() throws {
        let clock = VirtualTimeExecutor()
        let writer = DeferredAttempt<Int, any Error>()
        let limited = writer.attempt.timeout(after: .seconds(1), upon: clock)
        writer.succeed(with: 3)
        clock.runUntilIdle()
        #expect(try limited.peek()?.get() == 3)
    }
}
