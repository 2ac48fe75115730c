import Deferred
import DeferredExecutors
import TestSupport
import Testing

extension StressSuites {
    /// The shapes of time-dependent tests that flake elsewhere, written with the virtual clock's
    /// tools, each run ``TestSize/timeTravelRuns`` times (100 at the quick size, 10,000 at full
    /// size in CI's release stage) with no real sleep anywhere: each run must pass.
    ///
    /// The shapes come from reports against other clocks (a sleep armed after the test advanced,
    /// a task started inside the code under test, a stream fed by a timer, a debounce, a retry
    /// with jittered backoff).
    @Suite struct TimeTravelShapeTests {
        static let runs = TestSize.sanitized(TestSize.current.timeTravelRuns)

        /// Runs `shape` ``runs`` times; expects every run to pass and says how many did.
        static func everyRun(_ name: String, _ shape: (Int) async throws -> Bool) async rethrows {
            var passed = 0
            for run in 0..<runs where try await shape(run) {
                passed += 1
            }
            progress("\(name): \(passed) of \(runs) runs passed")
            #expect(passed == runs, "\(name): \(runs - passed) of \(runs) runs failed")
        }

        // MARK: A sleep armed after the test advanced

        /// A feature that does something a second after it starts, in a task of its own: the
        /// test must not advance before the task sleeps, or the action never fires.
        final class DelayedAction: Sendable {
            let fired = Deferred<Duration>()

            func start(on clock: VirtualTimeExecutor) {
                Task {
                    try await clock.sleep(for: .seconds(1))
                    fired.fill(with: clock.elapsed)
                }
            }
        }

        @Test func aSleepArmedAfterTheTestWouldHaveAdvanced() async throws {
            try await Self.everyRun("sleep armed late") { _ in
                let clock = VirtualTimeExecutor()
                let action = DelayedAction()
                action.start(on: clock)
                try await clock.advance(by: .seconds(1), afterArming: 1)
                return await action.fired.value == .seconds(1)
            }
        }

        // MARK: A task started inside the code under test

        /// A screen model that loads in an unstructured task of its own when it appears, and
        /// shows a spinner only if the load takes longer than half a second.
        final class ScreenModel: Sendable {
            let spinnerShown = Counter()
            let loaded = Deferred<String>()

            func onAppear(clock: VirtualTimeExecutor, load: Future<String>) {
                Task {
                    let spinner = Attempt<Void, any Error>(succeededWith: ()).delay(by: .milliseconds(500), upon: clock)
                    spinner.uponSuccess(.immediate) { _ in self.spinnerShown.increment() }
                    let text = await load.value
                    spinner.cancel()
                    loaded.fill(with: text)
                }
            }
        }

        @Test func aTaskStartedInsideTheCodeUnderTest() async throws {
            try await Self.everyRun("task inside the code under test") { run in
                let clock = VirtualTimeExecutor()
                let model = ScreenModel()
                let reply = Deferred<String>()
                model.onAppear(clock: clock, load: Future(reply))
                try await clock.waitUntilArmed(at: clock.now + .milliseconds(500))
                let slow = run % 2 == 0
                if slow {
                    clock.advance(by: .milliseconds(500))
                }
                reply.fill(with: "profile")
                let text = await model.loaded.value
                clock.advance(by: .seconds(1))
                return text == "profile" && model.spinnerShown.value == (slow ? 1 : 0)
            }
        }

        // MARK: A stream fed by a timer

        /// A value every `interval` on the clock, as an `AsyncStream`, until the consumer stops.
        static func ticks(every interval: Duration, on clock: VirtualTimeExecutor) -> AsyncStream<Duration> {
            AsyncStream { continuation in
                @Sendable func tick() {
                    guard case .enqueued = continuation.yield(clock.elapsed) else {
                        return
                    }
                    clock.submit(after: interval, tick)
                }
                clock.submit(after: interval, tick)
            }
        }

        @Test func aStreamFedByATimer() async throws {
            try await Self.everyRun("stream fed by a timer") { _ in
                let clock = VirtualTimeExecutor()
                let seen = try await clock.run {
                    var seen: [Duration] = []
                    for await tick in Self.ticks(every: .seconds(5), on: clock).prefix(4) {
                        seen.append(tick)
                    }
                    return seen
                }
                // The consumer is gone: the next tick finds the stream ended and stops the timer.
                clock.advance(by: .seconds(5))
                return seen == [.seconds(5), .seconds(10), .seconds(15), .seconds(20)] && !clock.hasPendingWork
            }
        }

        // MARK: A debounce

        /// Search as you type: each keystroke replaces the pending search, which starts once the
        /// text has rested for 300 ms.
        final class Debouncer: Sendable {
            let clock: VirtualTimeExecutor
            let searched = Locked<[(String, Duration)]>([])
            private let pending = Locked<Attempt<String, any Error>?>(nil)

            init(clock: VirtualTimeExecutor) {
                self.clock = clock
            }

            func textChanged(_ text: String) {
                let search = Attempt<String, any Error>(succeededWith: text).delay(by: .milliseconds(300), upon: clock)
                pending.withLock { $0.replace(with: search) }?.cancel()
                search.uponSuccess(.immediate) { [self] text in
                    searched.withLock { $0.append((text, clock.elapsed)) }
                }
            }
        }

        @Test func aDebounce() async throws {
            try await Self.everyRun("debounce") { run in
                let clock = VirtualTimeExecutor()
                let debouncer = Debouncer(clock: clock)
                try await clock.run {
                    for (index, text) in ["s", "sw", "swi", "swift"].enumerated() {
                        debouncer.textChanged(text)
                        // Typing speeds vary from run to run, always under the rest of 300 ms.
                        try await clock.sleep(for: .milliseconds(100 + (run + index) % 150))
                    }
                    try await clock.sleep(for: .seconds(1))
                }
                let typed = (0..<3).reduce(Duration.zero) { $0 + .milliseconds(100 + (run + $1) % 150) }
                let searched = debouncer.searched.withLock { $0 }
                return searched.count == 1 && searched[0].0 == "swift" && searched[0].1 == typed + .milliseconds(300)
            }
        }

        // MARK: Retry with jittered backoff

        @Test func aRetryWithJitteredBackoff() async throws {
            try await Self.everyRun("retry with jittered backoff") { run in
                let clock = VirtualTimeExecutor()
                let starts = Locked<[Duration]>([])
                // Jitter that differs from run to run and retry to retry, computed again below.
                @Sendable func wait(before retry: Int) -> Duration {
                    var random = SplitMix(seed: UInt64(run) << 8 | UInt64(retry))
                    return .seconds(1 << (retry - 1)) + .milliseconds(Int(random.next() % 100))
                }
                let backoff = RetryBackoff { _, retry in wait(before: retry) }
                let value = try await clock.run {
                    try await Attempt<Int, any Error>.retry(
                        attempts: 5, delay: .seconds(1), upon: clock, backoff: backoff
                    ) {
                        let attempt = starts.withLock { starts in
                            starts.append(clock.elapsed)
                            return starts.count
                        }
                        return attempt < 4
                            ? Attempt(failedWith: TestError.failed(attempt)) : Attempt(succeededWith: attempt)
                    }.get()
                }
                var expected: [Duration] = [.zero]
                for retry in 1...3 {
                    expected.append(expected[retry - 1] + wait(before: retry))
                }
                return value == 4 && starts.withLock { $0 } == expected
            }
        }
    }
}

extension Optional {
    /// Stores `value` and returns what was here.
    fileprivate mutating func replace(with value: Wrapped) -> Wrapped? {
        let old = self
        self = value
        return old
    }
}
