import Deferred
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

/// A Dispatch queue's delayed bodies (`submit(after:)`, and with it every `timeout`, `delay` and
/// retry backoff on a queue) wait in one heap served by one timer: each still runs once, on its
/// queue, never before its deadline, and one due sooner is never held back by a later one.
@Suite struct DispatchTimersTests {
    /// When a body ran, against when it was due, and whether it ran on its queue.
    final class Runs: Sendable {
        private let early = Atomic<Int>(0)
        private let elsewhere = Atomic<Int>(0)
        let ran = Counter()

        func record(due: UInt64, onQueue: Bool) {
            if DispatchTime.now().uptimeNanoseconds < due {
                early.wrappingAdd(1, ordering: .relaxed)
            }
            if !onQueue {
                elsewhere.wrappingAdd(1, ordering: .relaxed)
            }
            ran.increment()
        }

        var earlyCount: Int { early.load(ordering: .relaxed) }
        var elsewhereCount: Int { elsewhere.load(ordering: .relaxed) }
    }

    static let key = DispatchSpecificKey<Int>()

    /// Whether `done` becomes true within 30 seconds.
    static func eventually(_ done: () -> Bool) -> Bool {
        let end = ContinuousClock.now + .seconds(30)
        while !done() {
            guard ContinuousClock.now < end else {
                return false
            }
            usleep(1_000)
        }
        return true
    }

    /// Schedules a body on `queue` (marked with `mark`) after `delay`, recording into `runs`.
    static func schedule(_ delay: Duration, on queue: DispatchQueue, mark: Int, into runs: Runs) {
        let due =
            DispatchTime.now().uptimeNanoseconds + UInt64(delay.components.attoseconds / 1_000_000_000)
            + UInt64(delay.components.seconds) * 1_000_000_000
        queue.submit(after: delay) {
            runs.record(due: due, onQueue: DispatchQueue.getSpecific(key: key) == mark)
        }
    }

    @Test func delayedBodiesRunOnceOnTheirQueueAndNeverBeforeTheirDeadline() {
        let queues = (0..<3).map { index in
            let queue = DispatchQueue(label: "timers.\(index)", attributes: index == 0 ? .concurrent : [])
            queue.setSpecific(key: Self.key, value: index + 1)
            return queue
        }
        let runs = Runs()
        var generator = SystemRandomNumberGenerator()
        for index in 0..<300 {
            let delay = Duration.microseconds(Int.random(in: 1...20_000, using: &generator))
            Self.schedule(delay, on: queues[index % 3], mark: index % 3 + 1, into: runs)
        }
        #expect(Self.eventually { runs.ran.value == 300 }, "\(runs.ran.value) of 300 ran")
        #expect(runs.earlyCount == 0, "bodies that ran before their deadline")
        #expect(runs.elsewhereCount == 0, "bodies that ran off their queue")
        for queue in queues {
            queue.sync(flags: .barrier) {}
        }
        #expect(runs.ran.value == 300, "no body ran twice")
    }

    @Test func bodiesWithOneDelayFromOneThreadRunInTheOrderScheduled() {
        let queue = DispatchQueue(label: "timers.serial")
        let recorder = OrderRecorder(count: 500)
        let ran = Counter()
        for index in 0..<500 {
            queue.submit(after: .milliseconds(2)) {
                recorder.record(index)
                ran.increment()
            }
        }
        #expect(Self.eventually { ran.value == 500 })
        #expect(recorder.order == Array(0..<500))
    }

    @Test func aDeadlineScheduledAfterALaterOneIsNotHeldBackByIt() {
        let queue = DispatchQueue(label: "timers.rearm")
        // A body far away arms the timer for its deadline first.
        queue.submit(after: .seconds(120)) {}
        let ran = Deferred<Void>()
        let start = ContinuousClock.now
        queue.submit(after: .milliseconds(10)) { ran.fill() }
        #expect(ran.wait(until: .now() + .seconds(20)) != nil, "the sooner body ran")
        #expect(ContinuousClock.now - start < .seconds(20))
    }

    @Test func deadlinesScheduledFromManyThreadsAtOnceAreAllKept() {
        // Each thread schedules ever sooner deadlines, so that threads keep lowering the timer
        // against each other.
        let queue = DispatchQueue(label: "timers.many", attributes: .concurrent)
        queue.setSpecific(key: Self.key, value: 9)
        let runs = Runs()
        let threads = 4
        let perThread = 250
        let start = DispatchSemaphore(value: 0)
        let group = DispatchGroup()
        for _ in 0..<threads {
            DispatchQueue.global().async(group: group) {
                start.wait()
                for index in 0..<perThread {
                    Self.schedule(.microseconds(20 * (perThread - index)), on: queue, mark: 9, into: runs)
                }
            }
        }
        for _ in 0..<threads {
            start.signal()
        }
        group.wait()
        #expect(Self.eventually { runs.ran.value == threads * perThread })
        #expect(runs.earlyCount == 0)
        #expect(runs.elsewhereCount == 0)
    }

    @Test func aZeroOrNegativeDelayRunsAsSubmitWould() {
        let queue = DispatchQueue(label: "timers.zero")
        let recorder = OrderRecorder(count: 3)
        queue.submit(after: .zero) { recorder.record(0) }
        queue.submit(after: .milliseconds(-5)) { recorder.record(1) }
        queue.submit { recorder.record(2) }
        queue.flush()
        #expect(recorder.order == [0, 1, 2])
    }

    @Test func aTimeLimitOnAQueueStillFailsAnAttemptThatIsTooSlow() {
        let writer = DeferredAttempt<Int, TestError>()
        let stopped = Deferred<Void>()
        writer.onCancel { stopped.fill() }
        let limited = writer.attempt.timeout(
            after: .milliseconds(5), upon: DispatchQueue.global(), failingWith: .failed(1))
        #expect(limited.wait(until: .now() + .seconds(20)) == .failure(.failed(1)))
        #expect(stopped.wait(until: .now() + .seconds(20)) != nil, "the limit stopped the slow work")
    }
}
