import DeferredExecutors
import Dispatch
import TestSupport
import Testing

/// Timeouts and retries of attempts, on virtual time: instant and exact.
@Suite struct AttemptTimingTests {
    @Test func aTimeoutFailsTheAttemptAndCancelsTheWorkAtTheLimit() {
        let clock = VirtualTimeExecutor()
        let work = DeferredAttempt<Int, TestError>()
        let limited = work.attempt.timeout(after: .seconds(5), upon: clock, failingWith: .timedOut)
        clock.advance(by: .seconds(4))
        #expect(limited.peek() == nil)
        #expect(work.isCancelled == false)
        clock.advance(by: .seconds(1))
        #expect(limited.peek() == .failure(.timedOut))
        #expect(work.isCancelled == true, "the producer is told to stop")
    }

    /// A caller told of a timeout finds the work stopped: the producer's cancel handler has run
    /// before the timed-out attempt's callbacks, on virtual time and on a Dispatch queue (whose
    /// limits wait in the shared timer heap), directly and through a `map`.
    @Test(arguments: [false, true], [false, true])
    func aTimeoutCancelsTheWorkBeforeItsCallbacksRun(onDispatch: Bool, throughMap: Bool) {
        let clock = VirtualTimeExecutor()
        let work = DeferredAttempt<Int, TestError>()
        let stopped = Counter()
        work.onCancel { stopped.increment() }
        let source = throughMap ? work.attempt.map(upon: .immediate) { $0 + 1 } : work.attempt
        let limited =
            onDispatch
            ? source.timeout(after: .milliseconds(1), upon: DispatchQueue(label: "limit"), failingWith: .timedOut)
            : source.timeout(after: .seconds(5), upon: clock, failingWith: .timedOut)
        let stoppedWhenTold = Deferred<Int>()
        limited.upon(.immediate) { _ in stoppedWhenTold.fill(with: stopped.value) }
        clock.advance(by: .seconds(5))
        #expect(stoppedWhenTold.wait(until: .now() + 10) == 1)
        #expect(limited.peek() == .failure(.timedOut))
    }

    @Test func retriesWaitTheBackoffBetweenAttempts() {
        let clock = VirtualTimeExecutor()
        let startedAt = OrderRecorder(count: 4)
        let times = TimeLog(clock: clock)
        let result = Attempt<Int, TestError>.retry(
            attempts: 4,
            delay: .seconds(1),
            upon: clock,
            backoff: .exponential()
        ) {
            let number = times.record()
            startedAt.record(number)
            return Attempt(failedWith: .failed(number))
        }
        #expect(times.all == [.zero], "the first attempt starts at once")
        clock.advance(by: .seconds(1))
        #expect(times.all == [.zero, .seconds(1)])
        clock.advance(by: .seconds(2))
        #expect(times.all == [.zero, .seconds(1), .seconds(3)])
        clock.advance(by: .seconds(4))
        #expect(times.all == [.zero, .seconds(1), .seconds(3), .seconds(7)])
        #expect(result.peek() == .failure(.failed(3)))
        #expect(startedAt.order == [0, 1, 2, 3])
    }

    @Test func cancellingDuringTheWaitStopsFurtherRetries() {
        let clock = VirtualTimeExecutor()
        let tries = Counter()
        let result = Attempt<Int, TestError>.retry(attempts: 4, delay: .seconds(1), upon: clock) {
            Attempt(failedWith: .failed(tries.increment()))
        }
        result.cancel()
        clock.advance(by: .seconds(10))
        #expect(tries.value == 1)
        #expect(result.peek() == .failure(.cancelled))
    }
}

/// Records the virtual times at which something happened.
private final class TimeLog: Sendable {
    private let clock: VirtualTimeExecutor
    private let entries = (0..<16).map { _ in Deferred<Duration>() }
    private let count = Counter()

    init(clock: VirtualTimeExecutor) {
        self.clock = clock
    }

    /// Records the current time and returns its index.
    func record() -> Int {
        let index = count.increment()
        entries[index].fill(with: clock.elapsed)
        return index
    }

    var all: [Duration] {
        entries.prefix(count.value).compactMap { $0.peek() }
    }
}
