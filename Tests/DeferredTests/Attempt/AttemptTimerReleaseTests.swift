import Deferred
import Dispatch
import TestSupport
import Testing

/// Guarantee 15: a cancelled attempt holds nothing.
///
/// Once `cancel()` returns, a pending timer (a
/// retry's backoff, a delay) keeps no reference to the work or its captures, though the timer
/// itself fires only much later.
@Suite struct AttemptTimerReleaseTests {
    /// A timer far beyond the test's life: anything it held would still be alive at the end.
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
        let live = LiveCount()
        let calls = Counter()
        var retrying: Attempt<Int, TestError>? = nil
        do {
            let tracked = LifetimeTracked(live)
            retrying = Attempt.retry(count: 3, delay: Self.farAway, on: DispatchQueue.global()) {
                _ = tracked
                calls.increment()
                return Attempt(failure: .failed(0))
            }
        }
        #expect(calls.value == 1, "the first attempt started; the retry waits out its backoff")
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
        let live = LiveCount()
        let producer = DeferredAttempt<LifetimeTracked, TestError>()
        let delayed = producer.attempt.delay(by: Self.farAway, on: DispatchQueue.global())
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

extension Result {
    /// The error, if this is a failure.
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { error } else { nil }
    }
}
