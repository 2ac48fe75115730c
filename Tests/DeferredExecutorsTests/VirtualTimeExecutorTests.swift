import Deferred
import DeferredExecutors
import Foundation
import TestSupport
import Testing

@Suite struct VirtualTimeExecutorTests {
    @Test func scheduledWorkRunsOnlyWhenTimeAdvances() {
        let clock = VirtualTimeExecutor()
        let ran = Counter()
        clock.submit(after: .seconds(10)) { ran.increment() }
        #expect(clock.elapsed == .zero)
        clock.advance(by: .seconds(9))
        #expect(ran.value == 0)
        #expect(clock.elapsed == .seconds(9))
        clock.advance(by: .seconds(1))
        #expect(ran.value == 1)
        #expect(clock.elapsed == .seconds(10))
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
            first.fill(with: clock.elapsed)
            clock.submit(after: .seconds(3)) {
                times.fill(with: [first.peek() ?? .zero, clock.elapsed])
            }
        }
        clock.advance(by: .seconds(10))
        #expect(times.peek() == [.seconds(2), .seconds(5)])
        #expect(clock.elapsed == .seconds(10))
    }

    @Test func aTimeoutOnVirtualTimeIsInstantAndExact() {
        let clock = VirtualTimeExecutor()
        let reply = Deferred<Int>()
        let limited = reply.timeout(after: .seconds(30), upon: clock, substituting: -1)
        clock.advance(by: .seconds(29))
        #expect(limited.peek() == nil)
        clock.advance(by: .seconds(1))
        #expect(limited.peek() == -1)
        #expect(reply.fill(with: 5) == true, "the late value still fills the original")
        #expect(limited.peek() == -1, "and is dropped by the timed-out future")
    }

    @Test func aValueBeforeTheTimeoutWins() {
        let clock = VirtualTimeExecutor()
        let reply = Deferred<Int>()
        let limited = reply.timeout(after: .seconds(30), upon: clock, substituting: -1)
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
            let limited = reply.timeout(after: .seconds(1), upon: clock, substituting: LifetimeTracked(live))
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
            _ = Deferred<LifetimeTracked>().timeout(
                after: .seconds(1), upon: clock, substituting: LifetimeTracked(live))
        }
        #expect(live.value == 1, "the pending timer holds the substitute")
        clock.advance(by: .seconds(1))
        #expect(live.value == 0)
    }

    @Test func delayFillsAfterTheDelay() {
        let clock = VirtualTimeExecutor()
        let source = Deferred<String>()
        let delayed = source.delay(by: .milliseconds(500), upon: clock)
        source.fill(with: "late")
        clock.advance(by: .milliseconds(499))
        #expect(delayed.peek() == nil)
        clock.advance(by: .milliseconds(1))
        #expect(delayed.peek() == "late")
    }

    @Test func delayCountsFromTheFillNotFromTheCall() {
        let clock = VirtualTimeExecutor()
        let source = Deferred<Int>()
        let delayed = source.delay(by: .seconds(1), upon: clock)
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

    // MARK: Submitting while the clock advances

    /// A body submitted from another thread while the clock advances is due at the time the
    /// clock had reached when it was submitted, never before: reading the clock and scheduling
    /// are one step, so bodies run in order of due time and the clock never goes back.
    @Test func bodiesSubmittedWhileTheClockAdvancesNeverRunInThePast() {
        let clock = VirtualTimeExecutor()
        let seen = SeenTimes()
        let advances = Counter()
        let submitted = Deferred<Void>()
        let minimum = TestSize.current.threadRaceRounds
        Thread {
            // Submits `minimum` bodies, and after every tenth waits for the next advance: the
            // submissions overlap the advances, and never outpace them (bodies due now that keep
            // coming would keep an advance from ending).
            for index in 0..<minimum {
                let submittedAt = clock.elapsed
                let delay = Duration.nanoseconds(index % 3)
                clock.submit(after: delay) { seen.record(ranAt: clock.elapsed, dueNoEarlierThan: submittedAt + delay) }
                if index % 10 == 9 {
                    let seenAdvances = advances.value
                    while advances.value == seenAdvances {}
                }
            }
            submitted.fill()
        }.start()
        while !submitted.isFilled {
            clock.advance(by: .nanoseconds(1))
            advances.increment()
        }
        clock.runUntilIdle()
        let (count, backwards, early) = seen.summary
        progress(
            "virtual clock under concurrent submission: \(count) bodies over \(advances.value) advances, \(backwards) ran at an earlier time than the one before, \(early) before their due time"
        )
        #expect(count == minimum, "every body ran")
        #expect(advances.value >= minimum / 10, "the clock advanced while the bodies were submitted")
        #expect(backwards == 0, "the clock never went back")
        #expect(early == 0, "no body ran before it was due")
    }

    // MARK: The clock

    @Test func advanceToMovesTheClockToAnInstantAndRunsWhatFallsDue() {
        let clock = VirtualTimeExecutor()
        let ran = Counter()
        clock.submit(after: .seconds(5)) { ran.increment() }
        clock.advance(to: clock.now.advanced(by: .seconds(4)))
        #expect(ran.value == 0)
        #expect(clock.elapsed == .seconds(4))
        clock.advance(to: VirtualTimeExecutor.Instant(sinceStart: .seconds(5)))
        #expect(ran.value == 1)
        clock.advance(to: VirtualTimeExecutor.Instant(sinceStart: .seconds(1)))
        #expect(clock.elapsed == .seconds(5), "an instant in the past leaves the clock where it is")
    }

    @Test func runUntilIdleRunsEverythingScheduledIncludingWhatItSchedules() {
        let clock = VirtualTimeExecutor()
        let times = OrderRecorder(count: 31)  // events by the second they run at
        clock.submit(after: .seconds(10)) {
            times.record(10)
            clock.submit(after: .seconds(20)) { times.record(30) }
        }
        clock.submit(after: .seconds(1)) { times.record(1) }
        #expect(clock.runUntilIdle() == 3, "it counts the bodies it ran, as ManualExecutor's does")
        #expect(times.order == [1, 10, 30])
        #expect(clock.elapsed == .seconds(30), "the clock stops at the last body's due time")
        #expect(!clock.hasPendingWork)
    }

    @Test func aTaskSleepingOnTheClockWakesWhenTheTestAdvancesIt() async throws {
        let clock = VirtualTimeExecutor()
        let woke = Deferred<Duration>()
        let sleeper = Task {
            try await clock.sleep(for: .seconds(60))
            woke.fill(with: clock.elapsed)
        }
        try await clock.waitUntilArmed()
        clock.advance(by: .seconds(59))
        #expect(clock.armed.map(\.kind) == [.sleep], "not before its time: still armed")
        #expect(woke.isFilled == false)
        clock.advance(by: .seconds(1))
        #expect(await woke.value == .seconds(60))
        try await sleeper.value
    }

    @Test func taskSleepWithTheClockSuspendsOnVirtualTime() async throws {
        let clock = VirtualTimeExecutor()
        let sleeper = Task { try await Task.sleep(for: .seconds(3600), tolerance: nil, clock: clock) }
        try await clock.waitUntilArmed()
        clock.advance(by: .seconds(3600))
        try await sleeper.value
        #expect(clock.elapsed == .seconds(3600))
    }

    @Test func aCancelledSleepEndsAtOnceAndLeavesNothingScheduled() async throws {
        let clock = VirtualTimeExecutor()
        let sleeper = Task { try await clock.sleep(for: .seconds(60)) }
        try await clock.waitUntilArmed()
        sleeper.cancel()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        #expect(!clock.hasPendingWork, "the cancelled sleep's wake-up is unscheduled")
        #expect(clock.elapsed == .zero)
    }

    @Test func aSleepInThePastReturnsAtOnce() async throws {
        let clock = VirtualTimeExecutor()
        clock.advance(by: .seconds(5))
        try await clock.sleep(until: VirtualTimeExecutor.Instant(sinceStart: .seconds(1)))
        #expect(!clock.hasPendingWork)
    }

    /// The guide's example: a retry with backoff of 1, 2 and 4 seconds, tested without waiting.
    @Test func aRetryWithBackoffRunsInMicroseconds() {
        let clock = VirtualTimeExecutor()
        let calls = OrderRecorder(count: 8)  // events by the second each try starts at
        let started = ContinuousClock.now
        let reply = Attempt<Int, TestError>.retry(
            attempts: 4, delay: .seconds(1), upon: clock, backoff: .exponential()
        ) {
            calls.record(Int(clock.elapsed.components.seconds))
            return calls.order.count < 4 ? Attempt(failedWith: .failed(0)) : Attempt(succeededWith: 42)
        }
        clock.runUntilIdle()
        #expect(reply.peek() == .success(42))
        #expect(calls.order == [0, 1, 3, 7], "tries at 0 s, then after 1, 2 and 4 s of backoff")
        #expect(ContinuousClock.now - started < .seconds(1))
    }
}

extension VirtualTimeExecutorTests {
    /// A body submitted while an advance ends is due at the time the clock reads when it is
    /// submitted, plus its delay, and runs at that time: the advance's last look for due bodies
    /// and its move to the end are one step, so no submission reads the clock between them.
    @Test func aBodySubmittedAsAnAdvanceEndsRunsAtItsDueTime() {
        let clock = VirtualTimeExecutor()
        let late = Counter()
        let checked = Counter()
        let stop = Counter()
        let done = Deferred<Void>()
        let started = Deferred<Void>()
        Thread {
            var submitted = 0
            while (stop.value == 0 || submitted == 0) && submitted < 50_000 {
                submitted += 1
                if submitted == 100 {
                    started.fill()
                }
                let before = clock.now
                let unchanged = Counter()
                clock.submit(after: .milliseconds(300)) {
                    // Judged only when the clock read the same before and after the submission,
                    // so the due time is known exactly.
                    if unchanged.value == 1 {
                        checked.increment()
                        if clock.now != before.advanced(by: .milliseconds(300)) {
                            late.increment()
                        }
                    }
                }
                if clock.now == before {
                    unchanged.increment()
                }
            }
            done.fill()
        }.start()
        // The advances begin once the submitter runs, so that they overlap its submissions.
        _ = started.wait(until: .now() + 30)
        for _ in 0..<TestSize.current.threadRaceRounds * 5 {
            clock.advance(by: .seconds(1))
        }
        stop.increment()
        _ = done.wait(until: .now() + 30)
        clock.runUntilIdle()
        progress("bodies submitted as advances end: \(checked.value) checked, \(late.value) ran late")
        #expect(checked.value > 0)
        #expect(late.value == 0, "no body ran after its due time")
    }
}

/// What the bodies of the concurrent-submission test saw.
final class SeenTimes: @unchecked Sendable {
    // `@unchecked Sendable`: every field is read and written only under `lock`.
    private let lock = NSLock()
    private var count = 0
    private var last = Duration.zero
    private var backwards = 0
    private var early = 0

    func record(ranAt time: Duration, dueNoEarlierThan due: Duration) {
        lock.withLock {
            count += 1
            backwards += time < last ? 1 : 0
            early += time < due ? 1 : 0
            last = max(last, time)
        }
    }

    var summary: (count: Int, backwards: Int, early: Int) {
        lock.withLock { (count, backwards, early) }
    }
}
