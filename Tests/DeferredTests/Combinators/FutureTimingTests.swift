import Deferred
import Dispatch
import TestSupport
import Testing

@Suite struct FutureTimingTests {
    @Test func aDispatchQueueRunsADelayedBodyAfterTheDelay() {
        let started = DispatchTime.now()
        let ran = Deferred<UInt64>()
        DispatchQueue.global().submit(after: .milliseconds(30)) {
            ran.fill(with: DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds)
        }
        #expect((ran.value() ?? 0) >= 30_000_000)
    }

    @Test func aZeroOrNegativeDelayRunsAsSoonAsPossible() {
        let ran = Deferred<Void>()
        DispatchQueue.global().submit(after: .seconds(-5)) { ran.fill() }
        #expect(ran.value(within: 1) != nil)
    }

    @Test func timeoutSubstitutesWhenTheValueIsLate() {
        let reply = Deferred<String>()
        let limited = reply.timeout(after: .milliseconds(20), upon: DispatchQueue.global(), substituting: "cached")
        #expect(limited.value() == "cached")
        reply.fill(with: "fresh")
        #expect(limited.peek() == "cached")
    }

    @Test func timeoutPassesOnAValueThatArrivesInTime() {
        let reply = Deferred<String>()
        let limited = reply.timeout(after: .seconds(30), upon: DispatchQueue.global(), substituting: "cached")
        reply.fill(with: "fresh")
        #expect(limited.peek() == "fresh")
    }

    @Test func timeoutOfAFilledFutureIsFilledAtOnce() {
        let limited = Future(filledWith: 1).timeout(after: .seconds(30), upon: DispatchQueue.global(), substituting: 0)
        #expect(limited.peek() == 1)
    }

    @Test func timeoutDoesNotKeepTheOriginalAlive() {
        let live = LiveCount()
        let limited: Future<Int>
        do {
            let reply = Deferred<Int>()
            let tracked = LifetimeTracked(live)
            reply.upon(.immediate) { _ in _ = tracked }
            limited = reply.timeout(after: .seconds(30), upon: DispatchQueue.global(), substituting: 0)
        }
        #expect(live.value == 0, "the original and its handlers were released")
        #expect(limited.peek() == nil)
    }

    @Test func delayFillsAfterTheSourceAndTheDelay() {
        let source = Deferred<Int>()
        let delayed = source.delay(by: .milliseconds(20), upon: DispatchQueue.global())
        let started = DispatchTime.now()
        source.fill(with: 4)
        #expect(delayed.value() == 4)
        #expect(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds >= 20_000_000)
    }

    @Test func durationsBecomeWholeNanosecondsWithinRange() {
        #expect(Duration.milliseconds(3).clampedNanoseconds == 3_000_000)
        #expect(Duration.nanoseconds(-1).clampedNanoseconds == 0)
        #expect(Duration.seconds(Int64.max).clampedNanoseconds == Int.max)
        #expect((Duration.seconds(1) + .nanoseconds(5)).clampedNanoseconds == 1_000_000_005)
    }
}
