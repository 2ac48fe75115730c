import Deferred
import Dispatch
import Foundation
import TestSupport
import Testing

/// Guarantee 15: a cancelled attempt holds nothing.
///
/// Once `cancel()` returns, a pending timer (a
/// retry's backoff, a delay) keeps no reference to the work or its captures, though the timer
/// itself fires only much later.
@Suite struct AttemptTimerReleaseTests {
    /// The delay of every timer here; the timers are held by ``HeldTimers``, so they never come
    /// due while the test runs, however slow the machine.
    static let farAway = Duration.seconds(30)

    /// How a retry's backoff is cut short.
    enum Cancelling: String, CaseIterable, CustomTestStringConvertible {
        /// `cancel()` on the retry itself.
        case theRetry
        /// `cancel()` on a `map` of the retry, which nothing else needs.
        case aStageAfterIt

        var testDescription: String { rawValue }
    }

    @Test(arguments: Cancelling.allCases)
    func aCancelledRetryWaitingOutItsBackoffReleasesTheWork(_ cancelling: Cancelling) {
        let timers = HeldTimers()
        defer { timers.discardAll() }
        let live = LiveCount()
        let calls = Counter()
        var retrying: Attempt<Int, TestError>? = nil
        do {
            let tracked = LifetimeTracked(live)
            retrying = Attempt.retry(attempts: 4, delay: Self.farAway, upon: timers) {
                _ = tracked
                calls.increment()
                return Attempt(failedWith: .failed(0))
            }
        }
        #expect(calls.value == 1, "the first attempt started; the retry waits out its backoff")
        #expect(timers.count == 1)
        #expect(live.value == 1, "the work's captures are kept for the retries")
        switch cancelling {
        case .theRetry:
            retrying?.cancel()
        case .aStageAfterIt:
            retrying?.map(upon: .immediate) { $0 }.cancel()
        }
        #expect(live.value == 0, "the pending backoff timer keeps none of the work's captures")
        #expect(retrying?.peek() == .failure(.cancelled))
        retrying = nil
        #expect(calls.value == 1)
    }

    @Test func aCancelledDelayReleasesTheResultItWasHolding() {
        let timers = HeldTimers()
        defer { timers.discardAll() }
        let live = LiveCount()
        let producer = DeferredAttempt<LifetimeTracked, TestError>()
        let delayed = producer.attempt.delay(by: Self.farAway, upon: timers)
        producer.succeed(with: LifetimeTracked(live))
        producer.attempt.cancel()  // Withdraws nothing the delay holds: it is a late cancel.
        #expect(live.value == 1, "the producer and the delay hold the result")
        delayed.cancel()
        #expect(delayed.peek()?.failure == .cancelled)
        #expect(live.value == 1, "only the producer's own result is left")
        _ = consume producer
        #expect(live.value == 0, "the pending delay timer keeps none of the result")
    }
}

extension AttemptTimerReleaseTests {
    /// An error that keeps an object alive, as an error with a payload does.
    struct TrackedError: Error {
        let tracked: LifetimeTracked
    }

    @Test func aCancelledTimeoutKeepsNoneOfItsFailureInItsTimer() {
        let timers = HeldTimers()
        defer { timers.discardAll() }
        let live = LiveCount()
        let producer = DeferredAttempt<Int, any Error>()
        var limited: Attempt<Int, any Error>? = producer.attempt.timeout(
            after: Self.farAway, upon: timers, failingWith: TrackedError(tracked: LifetimeTracked(live)))
        #expect(live.value == 1)
        limited?.cancel()
        limited = nil
        #expect(live.value == 0, "the pending timer keeps nothing of the timed-out failure")
        withExtendedLifetime(producer) {}
    }

    @Test func aRetryThatSucceededKeepsNoneOfItsWork() {
        let timers = HeldTimers()
        defer { timers.discardAll() }
        let live = LiveCount()
        let producer = DeferredAttempt<Int, TestError>()
        let retrying: Attempt<Int, TestError> = {
            let tracked = LifetimeTracked(live)
            return Attempt.retry(attempts: 3, upon: timers) {
                _ = tracked
                return producer.attempt
            }
        }()
        #expect(live.value == 1, "kept for the retries while the first attempt runs")
        producer.succeed(with: 1)
        #expect(retrying.peek() == .success(1))
        #expect(live.value == 0, "no retry can follow a success: the work's captures are gone")
    }

    @Test func aDelayThatATaskGaveUpOnReleasesTheResultItWasHolding() async {
        let timers = HeldTimers()
        defer { timers.discardAll() }
        let live = LiveCount()
        let delayed: Attempt<LifetimeTracked, TestError> = {
            let producer = DeferredAttempt<LifetimeTracked, TestError>()
            let delayed = producer.attempt.delay(by: Self.farAway, upon: timers)
            producer.succeed(with: LifetimeTracked(live))
            return delayed
        }()
        let reader = Task { () async throws(TestError) -> LifetimeTracked in try await delayed.get() }
        try? await Task.sleep(for: .milliseconds(20))
        reader.cancel()
        #expect(await failure(of: reader) == .cancelled)
        #expect(live.value == 0, "the only reader gave up: the delay was cancelled and let its result go")
        #expect(delayed.isCancelled == true)
    }
}

extension Result {
    /// The error, if this is a failure.
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { error } else { nil }
    }
}

extension AttemptTimerReleaseTests {
    /// A timer kind whose pending content `cancel()` releases.
    enum TimerKind: String, CaseIterable, CustomTestStringConvertible {
        case retry, delay, timeout

        var testDescription: String { rawValue }
    }

    /// What the released capture's deinitializer does with the attempt (a logger, a registry).
    enum Reading: String, CaseIterable, CustomTestStringConvertible {
        case isCancelled, cancel

        var testDescription: String { rawValue }
    }

    /// How to reach the attempt under test, as app code keeps it (a registry, not a capture of
    /// the attempt by what the attempt holds).
    final class Registry: @unchecked Sendable {
        // `@unchecked Sendable`: `stored` is read and written only under `lock`.
        private let lock = NSLock()
        private var stored: (@Sendable () -> Void)?

        /// What the deinitializer below does with the attempt.
        var read: (@Sendable () -> Void)? {
            get { lock.withLock { stored } }
            set { lock.withLock { stored = newValue } }
        }
    }

    /// An object whose deinitializer reads the registered attempt.
    final class ReadsOnRelease: Sendable {
        let registry: Registry

        init(_ registry: Registry) {
            self.registry = registry
        }

        deinit {
            registry.read?()
        }
    }

    /// A failure that keeps an object alive.
    struct ReleasingError: Error {
        let reads: ReadsOnRelease
    }

    /// A capture that `cancel()` releases may read the same attempt from its deinitializer:
    /// the release comes after the cancellation is published, so the read sees it instead of
    /// waiting for a publication that only the cancelling thread would make.
    @Test(arguments: TimerKind.allCases, Reading.allCases)
    func aCaptureReleasedByCancelMayReadTheAttemptFromItsDeinitializer(_ kind: TimerKind, _ reading: Reading) {
        let timers = HeldTimers()
        defer { timers.discardAll() }
        let registry = Registry()
        let cancelled = Deferred<Bool>()
        Thread {
            let cancel: @Sendable () -> Bool
            switch kind {
            case .retry:
                let reads = ReadsOnRelease(registry)
                let attempt = Attempt<Int, TestError>.retry(attempts: 4, delay: Self.farAway, upon: timers) {
                    _ = reads
                    return Attempt(failedWith: .failed(0))
                }
                registry.read = Self.reading(attempt, reading)
                cancel = {
                    attempt.cancel()
                    return attempt.isCancelled
                }
            case .delay:
                let producer = DeferredAttempt<ReadsOnRelease, TestError>()
                let attempt = producer.attempt.delay(by: Self.farAway, upon: timers)
                producer.succeed(with: ReadsOnRelease(registry))
                registry.read = Self.reading(attempt, reading)
                cancel = {
                    attempt.cancel()
                    return attempt.isCancelled
                }
            case .timeout:
                let producer = DeferredAttempt<Int, any Error>()
                let attempt = producer.attempt.timeout(
                    after: Self.farAway, upon: timers, failingWith: ReleasingError(reads: ReadsOnRelease(registry)))
                registry.read = Self.reading(attempt, reading)
                cancel = {
                    attempt.cancel()
                    // The producer stays pending until then: released earlier, it would fail
                    // the attempt as abandoned.
                    _ = producer.isFilled
                    return attempt.isCancelled
                }
            }
            cancelled.fill(with: cancel())
        }.start()
        #expect(cancelled.wait(until: .now() + 10) == true, "cancel() returned, and the attempt is cancelled")
        registry.read = nil
    }

    /// What the deinitializer does with `attempt`.
    static func reading<Success, Failure>(_ attempt: Attempt<Success, Failure>, _ reading: Reading)
        -> @Sendable () -> Void
    {
        switch reading {
        case .isCancelled: { _ = attempt.isCancelled }
        case .cancel: { attempt.cancel() }
        }
    }
}
