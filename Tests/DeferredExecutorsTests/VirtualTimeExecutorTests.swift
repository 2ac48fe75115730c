import DeferredExecutors
import TestSupport
import Testing

@Suite struct VirtualTimeExecutorTests {
    @Test func scheduledWorkRunsOnlyWhenTimeAdvances() {
        let clock = VirtualTimeExecutor()
        let ran = Counter()
        clock.submit(after: .seconds(10)) { ran.increment() }
        #expect(clock.now == .zero)
        clock.advance(by: .seconds(9))
        #expect(ran.value == 0)
        #expect(clock.now == .seconds(9))
        clock.advance(by: .seconds(1))
        #expect(ran.value == 1)
        #expect(clock.now == .seconds(10))
        #expect(!clock.hasPendingWork)
    }

    @Test func workRunsInOrderOfDueTimeThenSubmission() {
        let clock = VirtualTimeExecutor()
        let recorder = OrderRecorder(count: 5)
        clock.submit(after: .seconds(3)) { recorder.record(3) }
        clock.submit(after: .seconds(1)) { recorder.record(0) }
        clock.submit(after: .seconds(2)) { recorder.record(1) }
        clock.submit(after: .seconds(2)) { recorder.record(2) }
        clock.submit(after: .seconds(4)) { recorder.record(4) }
        clock.advance(by: .seconds(3))
        #expect(recorder.order == [0, 1, 2, 3])
        clock.advance(by: .seconds(10))
        #expect(recorder.order == [0, 1, 2, 3, 4])
    }

    @Test func workSubmittedWithoutADelayRunsAtTheNextAdvance() {
        let clock = VirtualTimeExecutor()
        let ran = Counter()
        clock.submit { ran.increment() }
        #expect(ran.value == 0)
        clock.advance(by: .zero)
        #expect(ran.value == 1)
    }

    @Test func aBodySeesItsDueTimeAndMaySchedulesMoreWithinTheWindow() {
        let clock = VirtualTimeExecutor()
        let times = Deferred<[Duration]>()
        let first = Deferred<Duration>()
        clock.submit(after: .seconds(2)) {
            first.fill(with: clock.now)
            clock.submit(after: .seconds(3)) {
                times.fill(with: [first.peek() ?? .zero, clock.now])
            }
        }
        clock.advance(by: .seconds(10))
        #expect(times.peek() == [.seconds(2), .seconds(5)])
        #expect(clock.now == .seconds(10))
    }

    @Test func aTimeoutOnVirtualTimeIsInstantAndExact() {
        let clock = VirtualTimeExecutor()
        let reply = Deferred<Int>()
        let limited = reply.timeout(after: .seconds(30), on: clock, substituting: -1)
        clock.advance(by: .seconds(29))
        #expect(limited.peek() == nil)
        clock.advance(by: .seconds(1))
        #expect(limited.peek() == -1)
        #expect(reply.fill(with: 5), "the late value still fills the original")
        #expect(limited.peek() == -1, "and is dropped by the timed-out future")
    }

    @Test func aValueBeforeTheTimeoutWins() {
        let clock = VirtualTimeExecutor()
        let reply = Deferred<Int>()
        let limited = reply.timeout(after: .seconds(30), on: clock, substituting: -1)
        clock.advance(by: .seconds(10))
        reply.fill(with: 5)
        #expect(limited.peek() == 5)
        clock.advance(by: .seconds(30))
        #expect(limited.peek() == 5)
    }

    @Test func aTimedOutFutureDropsTheLateValueWithoutLeaking() {
        let clock = VirtualTimeExecutor()
        let live = LiveCount()
        do {
            let reply = Deferred<LifetimeTracked>()
            let limited = reply.timeout(after: .seconds(1), on: clock, substituting: LifetimeTracked(live))
            clock.advance(by: .seconds(1))
            let substitute = limited.peek()
            reply.fill(with: LifetimeTracked(live))
            #expect(limited.peek() === substitute, "the late value is not delivered")
        }
        #expect(live.value == 0, "nothing keeps the late value or the substitute alive")
    }

    @Test func anAbandonedTimeoutIsReleasedWhenItsTimerFires() {
        let clock = VirtualTimeExecutor()
        let live = LiveCount()
        do {
            _ = Deferred<LifetimeTracked>().timeout(after: .seconds(1), on: clock, substituting: LifetimeTracked(live))
        }
        #expect(live.value == 1, "the pending timer holds the substitute")
        clock.advance(by: .seconds(1))
        #expect(live.value == 0)
    }

    @Test func delayFillsAfterTheDelay() {
        let clock = VirtualTimeExecutor()
        let source = Deferred<String>()
        let delayed = source.delay(by: .milliseconds(500), on: clock)
        source.fill(with: "late")
        clock.advance(by: .milliseconds(499))
        #expect(delayed.peek() == nil)
        clock.advance(by: .milliseconds(1))
        #expect(delayed.peek() == "late")
    }

    @Test func delayCountsFromTheFillNotFromTheCall() {
        let clock = VirtualTimeExecutor()
        let source = Deferred<Int>()
        let delayed = source.delay(by: .seconds(1), on: clock)
        clock.advance(by: .seconds(5))
        #expect(delayed.peek() == nil)
        source.fill(with: 1)
        clock.advance(by: .milliseconds(999))
        #expect(delayed.peek() == nil)
        clock.advance(by: .milliseconds(1))
        #expect(delayed.peek() == 1)
    }

    #if EXIT_TESTS  // a test in a child process; see testSwiftSettings in Package.swift
        @Test func advancingWhileAdvancingTraps() async {
            await #expect(processExitsWith: .failure) {
                let clock = VirtualTimeExecutor()
                clock.submit { clock.advance(by: .seconds(1)) }
                clock.advance(by: .zero)
            }
        }
    #endif

    /// A hundred thousand bodies at scattered due times run by due time, then submission
    /// (each scheduled and taken in O(log n): a quadratic take would need minutes here).
    @Test func aHundredThousandBodiesRunByDueTimeThenSubmission() {
        let clock = VirtualTimeExecutor()
        let count = 100_000
        let dues = (0..<count).map { ($0 * 7_919) % 1_000 }
        let order = OrderRecorder(count: count)
        for index in 0..<count {
            clock.submit(after: .nanoseconds(dues[index])) { order.record(index) }
        }
        clock.advance(by: .microseconds(1))
        let expected = (0..<count).sorted { (dues[$0], $0) < (dues[$1], $1) }
        #expect(order.order == expected)
        #expect(!clock.hasPendingWork)
    }
}
