import Deferred
import DeferredExecutors
import Dispatch
import Synchronization
import TestSupport
import Testing

/// The operations a migrating user reaches for, on attempts.
///
/// Each test checks what the operation adds beyond the recipe it is made of. Their guarantees (exactly once, release, stack safety, cancellation and demand)
/// are in the suites over ``AttemptKind``.
@Suite struct AttemptRecipeTests {
    @Test func filterPassesAFailureOnWithoutAskingThePredicate() {
        let asked = Counter()
        let filtered = Attempt<Int, TestError>(failedWith: .failed(3)).filter(upon: .immediate, failingWith: .failed(0))
        {
            _ in
            asked.increment()
            return true
        }
        #expect(filtered.peek() == .failure(.failed(3)))
        #expect(asked.value == 0)
        #expect(
            Attempt<Int, TestError>(succeededWith: 1).filter(upon: .immediate, failingWith: .failed(0)) { $0 > 1 }
                .peek()
                == .failure(.failed(0)))
    }

    @Test func reduceAndFirstFailAsSoonAsOneFailsAndCancelTheRest() {
        let stopped = Counter()
        let slow = DeferredAttempt<Int, TestError>()
        slow.onCancel { stopped.increment() }
        let failing = DeferredAttempt<Int, TestError>()
        let total = [slow.attempt, failing.attempt].reduce(0, upon: .immediate, +)
        failing.fail(with: .failed(1))
        #expect(total.peek() == .failure(.failed(1)))
        #expect(stopped.value == 1, "the work nobody needs any more was stopped")

        let found = [Attempt<Int, TestError>(succeededWith: 5), Attempt(succeededWith: 50)]
            .first(upon: .immediate) { $0 > 10 }
        #expect(found.peek() == .success(50))
        #expect([Attempt<Int, TestError>]().reduce(1, upon: .immediate, +).peek() == .success(1))
    }

    @Test func allSucceededWithATransformStartsEveryAttemptNow() {
        let started = Counter()
        let users = [3, 1, 2].allSucceeded { id -> Attempt<String, TestError> in
            started.increment()
            return Attempt(succeededWith: "user \(id)")
        }
        #expect(started.value == 3)
        #expect(users.peek() == .success(["user 3", "user 1", "user 2"]))
    }

    @Test func aTransformThatThrowsCancelsTheAttemptsItStarted() {
        let stopped = Counter()
        let writers = Mutex<[HeldWriter<Int, TestError>]>([])
        #expect(throws: TestError.self) {
            try [1, 2, 3].allSucceeded { index -> Attempt<Int, TestError> in
                guard index < 3 else { throw TestError.failed(index) }
                let writer = HeldWriter<Int, TestError>()
                writer.onCancel { stopped.increment() }
                writers.withLock { $0.append(writer) }
                return writer.attempt
            }
        }
        #expect(stopped.value == 2)
    }

    @Test func aProducerSeesTheCancellationAndTheAttemptFailsAtOnce() {
        let stopped = Counter()
        let writers = Deferred<HeldWriter<Int, TestError>>()
        let download = Attempt<Int, TestError> { writer in
            writer.onCancel { stopped.increment() }
            writers.fill(with: HeldWriter(writer))
        }
        let writer = writers.peek()!
        #expect(writer.isCancelled == false)
        download.cancel()
        #expect(stopped.value == 1)
        #expect(writer.isCancelled == true)
        #expect(download.peek() == .failure(.cancelled))
        #expect(writer.succeed(with: 1) == false, "a late result changes nothing")
    }

    @Test func aProducerThatFinishesInItsBodyGivesAFinishedAttempt() throws {
        let answered = Attempt<Int, any Error> { $0.succeed(with: 42) }
        #expect(try answered.peek()?.get() == 42)
    }

    @Test func fallbackIntoAnotherFailureTypeRecoversOrTranslates() {
        let fromCache = Attempt<Int, TestError>(failedWith: .failed(1)).fallback(upon: .immediate) { error in
            Attempt<Int, WrappedTestError>(failedWith: .wrapped(error))
        }
        #expect(fromCache.peek() == .failure(.wrapped(.failed(1))))
        let recovered = Attempt<Int, TestError>(failedWith: .failed(1)).fallback(upon: .immediate) { _ in
            Attempt<Int, WrappedTestError>(succeededWith: 9)
        }
        #expect(recovered.peek() == .success(9))
        let passed = Attempt<Int, TestError>(succeededWith: 2).fallback(upon: .immediate) { _ in
            Attempt<Int, WrappedTestError>(succeededWith: 9)
        }
        #expect(passed.peek() == .success(2))
    }

    @Test func cancellingAFallbackIntoAnotherTypeStopsTheWorkItWaitsFor() {
        let first = DeferredAttempt<Int, TestError>()
        let firstStopped = Counter()
        first.onCancel { firstStopped.increment() }
        let second = DeferredAttempt<Int, WrappedTestError>()
        let secondStopped = Counter()
        second.onCancel { secondStopped.increment() }
        let started = Counter()
        let chained = first.attempt.fallback(upon: .immediate) { _ in
            started.increment()
            return second.attempt
        }
        first.fail(with: .failed(1))
        #expect(started.value == 1)
        chained.cancel()
        #expect(secondStopped.value == 1)
        #expect(chained.peek() == .failure(.cancelled))

        let waiting = DeferredAttempt<Int, TestError>()
        waiting.onCancel { firstStopped.increment() }
        let never = waiting.attempt.fallback(upon: .immediate) { _ in
            started.increment()
            return Attempt<Int, WrappedTestError>(succeededWith: 0)
        }
        never.cancel()
        #expect(firstStopped.value == 1)
        #expect(never.peek() == .failure(.cancelled))
        #expect(started.value == 1, "a cancelled fallback never starts")
    }

    /// A cancellation never reaches `start` as an error to fall back from, whether the source or
    /// the new attempt is cancelled, on any executor: the new failure type says how it fails.
    @Test(arguments: [false, true])
    func aCancellationNeverStartsAFallbackIntoAnotherType(onQueue: Bool) {
        let executor: any Executor = onQueue ? DispatchQueue.global() : ImmediateExecutor()
        for cancellingTheSource in [false, true] {
            let source = DeferredAttempt<Int, TestError>()
            let started = Counter()
            let typed = source.attempt.fallback(upon: executor) { _ in
                started.increment()
                return Attempt<Int, WrappedTestError>(succeededWith: 1)
            }
            let loose = source.attempt.fallback(upon: executor) { error -> Attempt<Int, any Error> in
                started.increment()
                return Attempt(failedWith: error)
            }
            if cancellingTheSource {
                source.attempt.cancel()
            } else {
                typed.cancel()
                loose.cancel()
            }
            #expect(typed.value() == .failure(.cancelled))
            #expect(loose.value().map { ($0.failureValue as? CancellationError) != nil } == true)
            #expect(typed.isCancelled && loose.isCancelled)
            #expect(started.value == 0)
        }
    }

    @Test func setFailureTypeLetsAnAttemptThatCannotFailJoinOthers() {
        let cached = Attempt<Int, Never>(succeededWith: 1).setFailureType(to: TestError.self)
        let joined = [cached, Attempt<Int, TestError>(succeededWith: 2)].allSucceeded()
        #expect(joined.peek() == .success([1, 2]))
        let pending = DeferredAttempt<Int, Never>()
        let typed = pending.attempt.setFailureType(to: TestError.self)
        typed.cancel()
        #expect(typed.peek() == .failure(.cancelled))
    }

    @Test func aDelayedResultArrivesAfterTheDelayOrFailsAtOnceWhenCancelled() {
        let clock = VirtualTimeExecutor()
        let stub = Attempt<Int, TestError>(filledWith: .success(1), after: .seconds(1), upon: clock)
        #expect(stub.peek() == nil)
        clock.advance(by: .seconds(1))
        #expect(stub.peek() == .success(1))
        let cancelled = Attempt<Int, TestError>(filledWith: .success(1), after: .seconds(1), upon: clock)
        cancelled.cancel()
        #expect(cancelled.peek() == .failure(.cancelled))
    }
}
