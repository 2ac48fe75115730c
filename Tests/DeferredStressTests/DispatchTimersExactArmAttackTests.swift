import Deferred
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

/// Attacks on `DispatchTimers` armed for the earliest deadline exactly.
///
/// Its `serve()` keeps handing over bodies that came due during its pass (a fresh eye's, against the
/// change that made limits fire on time; it found a body that came due during a long pass
/// overtaken by later deadlines). Public API only: `submit(after:)`, `timeout`, `delay`, `retry`, `cancel()`.
///
/// Deadlines are internal, so each is bracketed: read the uptime clock just before and just
/// after the call that schedules it; the real deadline lies in `[before + delay, after + delay]`.
/// "Early" means a start before the lower bound; "out of order" on a serial queue means a body
/// started after one whose lower bound is later than its own upper bound (it was scheduled,
/// and due, before the other was due, so any pass handing the other over had both due).
///
/// The counts below are the full size, CI's release stage; the quick run takes a third of each,
/// and a sanitizer a quarter of that (``TestSize/attackLoop(_:)``).
@Suite(.serialized) struct DispatchTimersExactArmAttackTests {
    // MARK: Helpers

    static let key = DispatchSpecificKey<Int>()

    @inline(__always) static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// Nanoseconds from now until `time`, at least 1.
    static func until(_ time: UInt64) -> UInt64 {
        let now = now()
        return time > now ? time - now : 1
    }

    /// One scheduled body: its deadline's bounds, how often it ran and when it first started.
    final class Entry: Sendable {
        let lower: UInt64
        let upperBound: Atomic<UInt64>
        var upper: UInt64 { upperBound.load(ordering: .relaxed) }
        let queue: Int
        let runs = Atomic<Int>(0)
        let start = Atomic<UInt64>(0)
        let offQueue = Atomic<Bool>(false)
        init(lower: UInt64, upper: UInt64, queue: Int) {
            self.lower = lower
            upperBound = Atomic(upper)
            self.queue = queue
        }
        func ran() {
            let time = DispatchTimersExactArmAttackTests.now()
            if runs.wrappingAdd(1, ordering: .relaxed).newValue == 1 {
                start.store(time, ordering: .relaxed)
            }
            if DispatchQueue.getSpecific(key: DispatchTimersExactArmAttackTests.key) != queue {
                offQueue.store(true, ordering: .relaxed)
            }
        }
    }

    /// The order bodies started in on one serial queue: appended only by that queue's bodies.
    final class Log: @unchecked Sendable {
        // `@unchecked Sendable` is sound: appended only on one serial queue, read after a `sync`.
        var order: [Entry] = []
        let count = Atomic<Int>(0)
        func append(_ entry: Entry) {
            order.append(entry)
            count.wrappingAdd(1, ordering: .releasing)
        }
    }

    /// Serial queues, each marked with its index (from 1) and with a log.
    static func serialQueues(_ count: Int, _ name: String) -> [(queue: DispatchQueue, log: Log)] {
        (1...count).map { index in
            let queue = DispatchQueue(label: "exact.\(name).\(index)")
            queue.setSpecific(key: key, value: index)
            return (queue, Log())
        }
    }

    /// Schedules a logged body on `queues[index - 1]` for `delay` nanoseconds.
    @discardableResult
    static func schedule(
        _ delay: UInt64, on index: Int, of queues: [(queue: DispatchQueue, log: Log)],
        then body: @escaping @Sendable () -> Void = {}
    ) -> Entry {
        let (queue, log) = queues[index - 1]
        let before = now()
        // The upper bound is set after the call; it is read only once everything ran.
        let entry = Entry(lower: before + delay, upper: .max, queue: index)
        queue.submit(after: .nanoseconds(Int64(delay))) {
            entry.ran()
            log.append(entry)
            body()
        }
        entry.upperBound.store(now() + delay, ordering: .relaxed)
        return entry
    }

    /// Bodies that started after one due strictly later (by more than `tolerance`) on the same
    /// serial queue: `(earlier-due body, how far its upper bound lies before the other's lower)`.
    static func inversions(_ order: [Entry], tolerance: UInt64 = 0) -> [(Entry, UInt64)] {
        var latest: UInt64 = 0
        var found: [(Entry, UInt64)] = []
        for entry in order {
            if entry.upper < .max - tolerance, latest > entry.upper + tolerance {
                found.append((entry, latest - entry.upper))
            }
            latest = max(latest, entry.lower)
        }
        return found
    }

    /// Checks exactly once, on its queue, never early, for every entry.
    static func checkRuns(_ entries: [Entry], _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let never = entries.filter { $0.runs.load(ordering: .relaxed) == 0 }.count
        let twice = entries.filter { $0.runs.load(ordering: .relaxed) > 1 }.count
        let early = entries.filter {
            $0.runs.load(ordering: .relaxed) > 0 && $0.start.load(ordering: .relaxed) < $0.lower
        }
        let off = entries.filter { $0.offQueue.load(ordering: .relaxed) }.count
        #expect(never == 0, "\(what): \(never) bodies never ran", sourceLocation: sourceLocation)
        #expect(twice == 0, "\(what): \(twice) bodies ran twice", sourceLocation: sourceLocation)
        #expect(
            early.count == 0,
            "\(what): \(early.count) bodies started early, by up to \(early.map { $0.lower - $0.start.load(ordering: .relaxed) }.max() ?? 0) ns",
            sourceLocation: sourceLocation)
        #expect(off == 0, "\(what): \(off) bodies ran off their queue", sourceLocation: sourceLocation)
    }

    static func eventually(within seconds: Double = 20, _ done: () -> Bool) -> Bool {
        let end = now() + UInt64(seconds * 1e9)
        while !done() {
            guard now() < end else { return false }
            usleep(500)
        }
        return true
    }

    /// Runs `body` on `threads` threads released together.
    static func onThreads(_ threads: Int, _ body: @escaping @Sendable (Int) -> Void) {
        let group = DispatchGroup()
        let gate = DispatchSemaphore(value: 0)
        for index in 0..<threads {
            group.enter()
            Thread {
                gate.wait()
                body(index)
                group.leave()
            }.start()
        }
        for _ in 0..<threads { gate.signal() }
        group.wait()
    }

    static func drain(_ queues: [(queue: DispatchQueue, log: Log)], expecting total: Int) -> Bool {
        let done = eventually { queues.reduce(0) { $0 + $1.log.count.load(ordering: .acquiring) } >= total }
        for (queue, _) in queues { queue.sync {} }
        return done
    }

    // MARK: A pass that keeps handing over

    /// A body that comes due during a long hand-over starts before the bodies due after it.
    ///
    /// 40,000 bodies due at one instant make `serve()` hand over for a long time; 200 bodies on a
    /// serial queue are due 50 µs apart after them. As soon as the first of the burst runs, a
    /// body is scheduled on the serial queue 1 ns ahead: it is due long before most of the 200,
    /// and was scheduled before they were due. It must start before every one of them due
    /// after it (deadline order); a pass that re-read the clock without taking the new timers
    /// first handed them over while the new body waited on the pending stack.
    @Test func aBodyDueDuringALongHandOverIsNotOvertakenByLaterDeadlines() {
        let burst = TestSize.attackLoop(40_000)
        var worst = 0
        for round in 0..<3 {
            let queues = Self.serialQueues(2, "burst.\(round)")
            let started = Atomic<Bool>(false)
            let target = Self.now() + 500_000_000
            var entries: [Entry] = []
            for k in 1...200 {
                entries.append(Self.schedule(Self.until(target + UInt64(k) * 50_000), on: 1, of: queues))
            }
            for _ in 0..<burst {
                queues[1].queue.submit(after: .nanoseconds(Int64(Self.until(target)))) {
                    started.store(true, ordering: .relaxed)
                }
            }
            guard Self.now() < target else {
                Issue.record("scheduling the burst took more than 0.5 s")
                return
            }
            #expect(Self.eventually { started.load(ordering: .relaxed) })
            let late = Self.schedule(1, on: 1, of: queues)
            #expect(Self.drain(queues, expecting: 201))
            let order = queues[0].log.order
            let position = order.firstIndex { $0 === late }!
            let overtaking = order[..<position].filter { $0.lower > late.upper }
            progress(
                "burst round \(round): the late body started after \(position) of the 200, \(overtaking.count) of them due after it (by up to \((overtaking.map { $0.lower - late.upper }.max() ?? 0) / 1000) µs); late by \((late.start.load(ordering: .relaxed) - late.upper) / 1000) µs"
            )
            worst = max(worst, overtaking.count)
            Self.checkRuns(entries + [late], "burst round \(round)")
        }
        #expect(worst == 0, "a body due before \(worst) others on its serial queue started after them")
    }

    /// A stream overloading the service (deadlines 200 ns apart on one serial queue, 20 ms of
    /// them) and a body scheduled 1 ms ahead on the same queue once the stream runs: bodies of
    /// the stream due more than a millisecond after it must not start before it, and it must
    /// not wait for the whole stream.
    @Test func aStreamThatOverloadsTheServiceDoesNotHoldBackAnEarlierDeadline() {
        let queues = Self.serialQueues(1, "stream")
        let count = TestSize.attackLoop(100_000)
        let started = Atomic<Bool>(false)
        let target = Self.now() + 500_000_000
        var entries: [Entry] = []
        entries.reserveCapacity(count)
        for index in 0..<count {
            entries.append(
                Self.schedule(Self.until(target + UInt64(index) * 200), on: 1, of: queues) {
                    started.store(true, ordering: .relaxed)
                })
        }
        guard Self.now() < target else {
            Issue.record("scheduling the stream took more than 0.5 s")
            return
        }
        #expect(Self.eventually { started.load(ordering: .relaxed) })
        let early = Self.schedule(1_000_000, on: 1, of: queues)
        #expect(Self.drain(queues, expecting: count + 1))
        let order = queues[0].log.order
        let position = order.firstIndex { $0 === early }!
        let overtaking = order[..<position].filter { $0.lower > early.upper + 1_000_000 }
        let streamEnd = entries.last!.start.load(ordering: .relaxed)
        let lateness = Int64(early.start.load(ordering: .relaxed)) - Int64(early.upper)
        progress(
            "stream: the 1 ms body started after \(position) of \(count), \(overtaking.count) of them due over 1 ms after it; late by \(lateness / 1000) µs; the stream ended \((Int64(streamEnd) - Int64(early.start.load(ordering: .relaxed))) / 1000) µs after it started"
        )
        #expect(overtaking.count == 0, "\(overtaking.count) bodies due over 1 ms after it started before it")
        Self.checkRuns(entries + [early], "stream")
    }

    // MARK: Storms

    /// Four threads on two cores schedule bodies on three serial queues with deadlines 0-200 µs
    /// apart (random, often equal to the microsecond), and time limits on the same queues that
    /// two of them beat at random moments (succeed or cancel): every body runs once, on its
    /// queue, never early, in deadline order per queue; a limit beaten before its deadline
    /// never expires; one that expires does so on its queue, not early.
    @Test func aStormOfCloseDeadlinesWhileLimitsAreBeatenAtRandom() {
        let queues = Self.serialQueues(3, "storm")
        let perThread = TestSize.attackLoop(6_000)
        final class Limit: Sendable {
            let writer = HeldWriter<Int, TestError>()
            let limited: NSLocked<Attempt<Int, TestError>?> = NSLocked(nil)
            let lower = Atomic<UInt64>(0)
            let beaten = Atomic<UInt64>(0)  // when the beat call returned
            let expiredAt = Atomic<UInt64>(0)
            let handled = Atomic<Int>(0)
            let expiredOff = Atomic<Bool>(false)
            /// Set once `upon` returned: a handler that runs before ran inside `upon`, on the
            /// caller's thread, because the limit had already expired.
            let attached = Atomic<Bool>(false)
        }
        let limits = NSLocked<[Limit]>([])
        let bodies = NSLocked<[Entry]>([])
        Self.onThreads(4) { thread in
            var random = SplitMix(seed: .random(in: 1...UInt64.max))
            var cursor = Self.now() + 300_000
            var mine: [Entry] = []
            var myLimits: [Limit] = []
            for step in 0..<perThread {
                let now = Self.now()
                if cursor < now + 20_000 { cursor = now + 20_000 + random.next() % 300_000 }
                // 0-200 µs apart, in whole microseconds a third of the time (equal deadlines).
                let gap = random.next() % 3 == 0 ? (random.next() % 3) * 1_000 : random.next() % 200_000
                cursor = random.next() % 4 == 0 ? cursor - min(gap, cursor - now - 1_000) : cursor + gap
                let index = 1 + Int(random.next() % 3)
                if thread < 2 || step % 2 == 0 {
                    mine.append(Self.schedule(Self.until(cursor), on: index, of: queues))
                } else {
                    // A limit, beaten a random while later (before or after its deadline).
                    let limit = Limit()
                    let (queue, log) = queues[index - 1]
                    let before = Self.now()
                    let micros = Int64(max(cursor > before ? cursor - before : 0, 1_000) / 1_000)
                    let limited = limit.writer.attempt.timeout(
                        after: .microseconds(micros), upon: queue, failingWith: .timedOut)
                    limit.lower.store(before + UInt64(micros) * 1_000, ordering: .relaxed)
                    limited.upon(.immediate) { result in
                        limit.handled.wrappingAdd(1, ordering: .relaxed)
                        if result == .failure(.timedOut) {
                            limit.expiredAt.store(Self.now(), ordering: .relaxed)
                            if DispatchQueue.getSpecific(key: Self.key) != index {
                                if limit.attached.load(ordering: .acquiring) {
                                    limit.expiredOff.store(true, ordering: .relaxed)
                                }
                            } else {
                                // Logged as a body of the queue, for the order check.
                                log.append(
                                    Entry(lower: limit.lower.load(ordering: .relaxed), upper: .max, queue: index))
                            }
                        }
                    }
                    limit.attached.store(true, ordering: .releasing)
                    limit.limited.withLock { $0 = limited }
                    myLimits.append(limit)
                    if myLimits.count >= 8 {
                        for limit in myLimits.shuffled(using: &random) {
                            if random.next() % 3 == 0 {
                                usleep(UInt32(random.next() % 400))  // Often past its deadline.
                            } else {
                                RaceHarness.pause(Int(random.next() % 400))
                            }
                            if random.next() % 2 == 0 {
                                _ = limit.writer.succeed(with: 1)
                            } else {
                                limit.limited.withLock { $0 }!.cancel()
                            }
                            limit.beaten.store(Self.now(), ordering: .relaxed)
                        }
                        limits.withLock { $0 += myLimits }
                        myLimits.removeAll()
                    }
                }
                if step % 97 == 0 { usleep(UInt32(random.next() % 150)) }
            }
            for limit in myLimits {
                limit.limited.withLock { $0 }!.cancel()
                limit.beaten.store(Self.now(), ordering: .relaxed)
            }
            limits.withLock { $0 += myLimits }
            bodies.withLock { $0 += mine }
        }
        let entries = bodies.withLock { $0 }
        let allLimits = limits.withLock { $0 }
        #expect(Self.eventually { entries.allSatisfy { $0.runs.load(ordering: .relaxed) > 0 } })
        #expect(Self.eventually { allLimits.allSatisfy { $0.handled.load(ordering: .relaxed) > 0 } })
        for (queue, _) in queues { queue.sync {} }
        usleep(20_000)
        Self.checkRuns(entries, "storm")
        var expired = 0
        var beatenFirstButExpired = 0
        var expiredEarly = 0
        var handledTwice = 0
        var expiredOff = 0
        for limit in allLimits {
            if limit.handled.load(ordering: .relaxed) != 1 { handledTwice += 1 }
            let at = limit.expiredAt.load(ordering: .relaxed)
            guard at != 0 else { continue }
            expired += 1
            if at < limit.lower.load(ordering: .relaxed) { expiredEarly += 1 }
            if limit.beaten.load(ordering: .relaxed) < limit.lower.load(ordering: .relaxed) {
                beatenFirstButExpired += 1
            }
            if limit.expiredOff.load(ordering: .relaxed) { expiredOff += 1 }
        }
        var inverted = 0
        var worstInversion: UInt64 = 0
        for (_, log) in queues {
            // A limit's upper bound is unknown (`.max`), so only bodies are judged against them.
            let found = Self.inversions(log.order)
            inverted += found.count
            worstInversion = max(worstInversion, found.map(\.1).max() ?? 0)
        }
        progress(
            "storm: \(entries.count) bodies, \(allLimits.count) limits (\(expired) expired), \(inverted) started after a later deadline (by up to \(worstInversion / 1000) µs)"
        )
        #expect(handledTwice == 0, "\(handledTwice) limits handled other than once")
        #expect(expiredEarly == 0, "\(expiredEarly) limits expired early")
        #expect(beatenFirstButExpired == 0, "\(beatenFirstButExpired) limits beaten before their deadline expired")
        #expect(expiredOff == 0, "\(expiredOff) limits expired off their queue")
        #expect(inverted == 0, "\(inverted) bodies started after a body due later on their serial queue")
    }

    // MARK: Order

    /// On a serial queue, deadlines scheduled ever earlier by less than a call takes (so they
    /// are near-equal and may tie), all aimed at one instant, or with one delay, from one
    /// thread and across three queues: each queue starts them in deadline order.
    @Test(arguments: ["ever earlier", "one instant", "one delay", "random within 2 µs"])
    func nearEqualDeadlinesStartInDeadlineOrder(shape: String) {
        let queues = Self.serialQueues(3, "order")
        let count = TestSize.attackLoop(30_000)
        var random = SplitMix(seed: .random(in: 1...UInt64.max))
        let target = Self.now() + 300_000_000
        var entries: [Entry] = []
        entries.reserveCapacity(count)
        for index in 0..<count {
            let delay: UInt64
            switch shape {
            case "ever earlier": delay = Self.until(target - UInt64(index) * 60)
            case "one instant": delay = Self.until(target)
            case "one delay": delay = 250_000_000
            default: delay = Self.until(target + random.next() % 2_000)
            }
            entries.append(Self.schedule(delay, on: 1 + index % 3, of: queues))
        }
        #expect(Self.now() < target, "scheduling took longer than the delays")
        #expect(Self.drain(queues, expecting: count))
        Self.checkRuns(entries, shape)
        for (index, (_, log)) in queues.enumerated() {
            let found = Self.inversions(log.order)
            #expect(
                found.count == 0,
                "\(shape), queue \(index): \(found.count) out of deadline order, by up to \((found.map(\.1).max() ?? 0) / 1000) µs"
            )
            if shape == "one delay" {
                // One thread, one delay: deadlines grow with the calls, so scheduling order.
                let scheduled = entries.filter { $0.queue == index + 1 }
                #expect(log.order.elementsEqual(scheduled, by: ===), "\(shape): not in scheduling order")
            }
        }
    }

    // MARK: Bodies that schedule bodies

    /// Bodies that, as they run on their queue, schedule the next ones (1 ns to 50 µs ahead,
    /// on their own queue and on another), in 8 chains of 1,500 links, while far bodies wait
    /// in the heap: each runs once, on its queue, never early, and in deadline order.
    @Test func bodiesScheduledFromInsideBodiesRunOnceOnTimeAndInOrder() {
        let queues = Self.serialQueues(2, "nested")
        let links = TestSize.attackLoop(1_500)
        let all = NSLocked<[Entry]>([])
        let done = Atomic<Int>(0)
        let farEntries = (0..<200).map { index in
            Self.schedule(UInt64(50_000_000 + index * 10_000), on: 1 + index % 2, of: queues)
        }
        @Sendable func link(_ chain: Int, _ remaining: Int, _ seed: UInt64) {
            var random = SplitMix(seed: seed)
            guard remaining > 0 else {
                done.wrappingAdd(1, ordering: .releasing)
                return
            }
            let delay = random.next() % 3 == 0 ? 1 : 1 + random.next() % 50_000
            let next = random.next()
            // A sibling on the other queue, due at nearly the same moment.
            let sibling = Self.schedule(delay + random.next() % 2_000, on: 2 - chain % 2, of: queues)
            let entry = Self.schedule(delay, on: 1 + chain % 2, of: queues) {
                link(chain, remaining - 1, next)
            }
            all.withLock { $0 += [entry, sibling] }
        }
        for chain in 0..<8 {
            link(chain, links, .random(in: 1...UInt64.max))
        }
        #expect(Self.eventually { done.load(ordering: .acquiring) == 8 }, "a chain stopped")
        #expect(Self.drain(queues, expecting: 8 * links * 2 + 200))
        Self.checkRuns(all.withLock { $0 } + farEntries, "nested")
        for (index, (_, log)) in queues.enumerated() {
            let found = Self.inversions(log.order)
            #expect(
                found.count == 0,
                "nested, queue \(index): \(found.count) out of deadline order, by up to \((found.map(\.1).max() ?? 0) / 1000) µs"
            )
        }
    }

    // MARK: Chains of stages

    /// 2,000 stages alternating `delay` (0-20 µs) and a one-minute `timeout` on a serial queue:
    /// the value arrives once, no sooner than the sum of the delays after the source, and every
    /// limit is withdrawn (none fires: the queue stays quiet afterwards).
    @Test func aDeepChainOfDelaysAndLimitsDeliversOnceAfterEveryDelay() {
        let queue = DispatchQueue(label: "exact.chain")
        let depth = TestSize.attackLoop(2_000)
        var random = SplitMix(seed: .random(in: 1...UInt64.max))
        let writer = HeldWriter<Int, TestError>()
        var tail = writer.attempt
        var total: UInt64 = 0
        for index in 0..<depth {
            if index.isMultiple(of: 2) {
                let micros = random.next() % 21
                total += micros * 1_000
                tail = tail.delay(by: .microseconds(Int64(micros)), upon: queue)
            } else {
                tail = tail.timeout(after: .seconds(60), upon: queue, failingWith: .timedOut)
            }
        }
        let handled = Atomic<Int>(0)
        let finishedAt = Atomic<UInt64>(0)
        tail.upon(.immediate) { _ in
            handled.wrappingAdd(1, ordering: .relaxed)
            finishedAt.store(Self.now(), ordering: .relaxed)
        }
        let filled = Self.now()
        _ = writer.succeed(with: 42)
        #expect(tail.wait(for: .seconds(20)) == .success(42))
        #expect(Self.eventually { handled.load(ordering: .relaxed) == 1 })
        #expect(finishedAt.load(ordering: .relaxed) >= filled + total, "the chain finished before its delays passed")
        usleep(50_000)
        #expect(handled.load(ordering: .relaxed) == 1)
        progress(
            "chain: \(depth) stages, delays \(total / 1000) µs, took \((finishedAt.load(ordering: .relaxed) - filled) / 1000) µs"
        )
    }

    /// A never-finishing source under 400 stacked limits 0-200 µs apart (each failing with its
    /// own error) on one serial queue, 40 rounds: the earliest deadline decides, never before
    /// its deadline, and the rest are withdrawn or find the attempt decided.
    @Test func stackedCloseLimitsAreDecidedByTheEarliestDeadline() {
        let queue = DispatchQueue(label: "exact.stacked")
        var random = SplitMix(seed: .random(in: 1...UInt64.max))
        var misdecided = 0
        var early = 0
        for round in 0..<TestSize.attackLoop(40) {
            let writer = HeldWriter<Int, TestError>()
            var tail = writer.attempt
            var bounds: [(lower: UInt64, upper: UInt64)] = []
            let base = Self.now() + 5_000_000
            for _ in 0..<400 {
                let before = Self.now()
                let micros = (max(base + random.next() % 200_000, before + 1_000) - before) / 1_000
                tail = tail.timeout(
                    after: .microseconds(Int64(micros)), upon: queue, failingWith: .failed(bounds.count))
                let after = Self.now()
                bounds.append((before + micros * 1_000, after + micros * 1_000))
            }
            let decidedAt = Atomic<UInt64>(0)
            tail.upon(.immediate) { _ in decidedAt.store(Self.now(), ordering: .relaxed) }
            guard case .failure(.failed(let winner))? = tail.wait(for: .seconds(20)) else {
                Issue.record("round \(round): not decided by a limit")
                continue
            }
            // Every limit whose lower bound is past the winner's upper bound lost fairly; one
            // whose upper bound is before the winner's lower bound should have won.
            if bounds.contains(where: { $0.upper < bounds[winner].lower }) { misdecided += 1 }
            if decidedAt.load(ordering: .relaxed) < bounds[winner].lower { early += 1 }
            // The deciding limit claims its own source's cancellation before it publishes; the
            // stages above that one, up to the writer, are let go of after it published, on the
            // timer's thread (ErrorsAndCancellation, "Known limits"), so a reader woken at once
            // may look before the writer is told.
            #expect(Self.eventually { writer.isCancelled }, "round \(round): the source was not cancelled")
        }
        #expect(misdecided == 0, "\(misdecided) rounds decided by a limit that was not the earliest")
        #expect(early == 0, "\(early) rounds decided before the deciding limit's deadline")
    }

    /// Retries with a backoff of 1-30 µs on a serial queue, 300 at once, each failing 5 times:
    /// each retry starts no sooner than its backoff after the failure, exactly 6 starts each.
    @Test func manyShortBackoffsWaitTheirDelayAndStartOnce() {
        let queue = DispatchQueue(label: "exact.retry")
        let count = TestSize.attackLoop(300)
        final class Run: Sendable {
            let starts = Atomic<Int>(0)
            let failedAt = Atomic<UInt64>(0)
            let early = Atomic<Int>(0)
        }
        var random = SplitMix(seed: .random(in: 1...UInt64.max))
        var attempts: [(Run, Attempt<Int, TestError>)] = []
        for _ in 0..<count {
            let run = Run()
            let micros = Int64(1 + random.next() % 30)
            let attempt = Attempt<Int, TestError>.retry(
                attempts: 6, delay: .microseconds(micros), upon: queue
            ) {
                let now = Self.now()
                let failed = run.failedAt.load(ordering: .relaxed)
                if failed != 0, now < failed + UInt64(micros) * 1_000 {
                    run.early.wrappingAdd(1, ordering: .relaxed)
                }
                let start = run.starts.wrappingAdd(1, ordering: .relaxed).newValue
                guard start < 6 else { return Attempt(succeededWith: start) }
                // Failed now: the backoff is measured from here (or later).
                run.failedAt.store(Self.now(), ordering: .relaxed)
                return Attempt(failedWith: .failed(start))
            }
            attempts.append((run, attempt))
        }
        for (run, attempt) in attempts {
            #expect(attempt.wait(for: .seconds(20)) == .success(6))
            #expect(run.starts.load(ordering: .relaxed) == 6)
            #expect(run.early.load(ordering: .relaxed) == 0, "a retry started before its backoff passed")
        }
    }

    // MARK: Lost wake-ups

    /// A lone body pushed from another thread at random moments around a wake-up: just before,
    /// during and after a pass handing over 1-3,000 bodies, with delays from 1 ns to 30 µs
    /// (often earlier than everything in the heap), while withdrawn one-hour limits make
    /// scheduling start extra passes (every 4,096): none is lost.
    @Test func aBodyPushedWhileAPassRunsIsNeverLost() {
        let queues = Self.serialQueues(2, "lost")
        let rounds = TestSize.attackLoop(200)
        var random = SplitMix(seed: .random(in: 1...UInt64.max))
        var lost = 0
        var worstWait: UInt64 = 0
        for round in 0..<rounds {
            let burst = Int(random.next() % 3_000) + 1
            let started = Atomic<Bool>(false)
            let target = Self.now() + 2_000_000 + UInt64(burst) * 600
            for _ in 0..<burst {
                queues[1].queue.submit(after: .nanoseconds(Int64(Self.until(target)))) {
                    started.store(true, ordering: .relaxed)
                }
            }
            for _ in 0..<Int(random.next() % 1_500) {
                let writer = DeferredAttempt<Int, TestError>()
                _ = writer.attempt.timeout(after: .seconds(3_600), upon: queues[1].queue, failingWith: .timedOut)
                _ = writer.succeed(with: 0)
            }
            let mode = random.next() % 3
            let offset = random.next() % 60_000
            let delay = random.next() % 4 == 0 ? 1 : 1 + random.next() % 30_000
            let ran = Atomic<UInt64>(0)
            let done = DispatchSemaphore(value: 0)
            let pushedAt = Atomic<UInt64>(0)
            Self.onThreads(1) { _ in
                switch mode {
                case 0:  // As the pass hands over.
                    while !started.load(ordering: .relaxed) { sched_yield() }
                    RaceHarness.pause(Int(offset % 2_000))
                default:  // Around the wake-up, by the clock.
                    let when = target - 30_000 + offset
                    while Self.now() < when { sched_yield() }
                }
                pushedAt.store(Self.now(), ordering: .relaxed)
                queues[0].queue.submit(after: .nanoseconds(Int64(delay))) {
                    ran.store(Self.now(), ordering: .relaxed)
                    done.signal()
                }
            }
            if done.wait(timeout: .now() + 3) == .timedOut {
                lost += 1
                Issue.record("round \(round): a body pushed (mode \(mode), delay \(delay) ns) never ran")
            } else {
                worstWait = max(worstWait, ran.load(ordering: .relaxed) - pushedAt.load(ordering: .relaxed))
            }
            #expect(Self.eventually { started.load(ordering: .relaxed) })
        }
        queues[1].queue.sync {}
        progress("lost wake-ups: \(rounds) rounds, \(lost) lost, worst wait \(worstWait / 1000) µs")
    }

    // MARK: Huge and short

    /// Huge delays (past the 2^62 ns cap, just under it, Int64.max seconds) mixed into two
    /// threads' close short deadlines: the short ones run once, on time, in order; the huge ones
    /// never, and a short one after them still runs (idleness: DispatchTimersAttackTests).
    @Test func hugeDelaysAmongCloseShortOnesNeitherFireHoldBackNorSpin() {
        let queues = Self.serialQueues(2, "huge")
        let fired = Atomic<Int>(0)
        var limits: [Attempt<Int, TestError>] = []
        let writer = HeldWriter<Int, TestError>()
        let cap: UInt64 = 1 << 62
        let hugeDelays: [Duration] = [
            .seconds(Int64.max), .nanoseconds(Int64.max), .nanoseconds(Int64(cap)),
            .nanoseconds(Int64(cap - Self.now() - 1_000_000_000)),  // a deadline just under the cap
            .nanoseconds(Int64(cap - Self.now())), .nanoseconds(Int64(cap - Self.now() + 1)),
            .seconds(1 << 40),
        ]
        let short = NSLocked<[Entry]>([])
        Self.onThreads(2) { thread in
            var random = SplitMix(seed: .random(in: 1...UInt64.max))
            var mine: [Entry] = []
            for step in 0..<TestSize.attackLoop(4_000) {
                if step % 500 == 0 {
                    for delay in hugeDelays {
                        queues[thread].queue.submit(after: delay) { fired.wrappingAdd(1, ordering: .relaxed) }
                    }
                }
                mine.append(Self.schedule(1 + random.next() % 200_000, on: 1 + thread, of: queues))
            }
            short.withLock { $0 += mine }
        }
        for delay in hugeDelays {
            limits.append(writer.attempt.timeout(after: delay, upon: queues[0].queue, failingWith: .timedOut))
        }
        let entries = short.withLock { $0 }
        #expect(Self.drain(queues, expecting: entries.count))
        Self.checkRuns(entries, "short among huge")
        for (index, (_, log)) in queues.enumerated() {
            let found = Self.inversions(log.order)
            #expect(
                found.count == 0,
                "queue \(index): \(found.count) out of deadline order, by up to \((found.map(\.1).max() ?? 0) / 1000) µs"
            )
        }
        usleep(100_000)
        #expect(fired.load(ordering: .relaxed) == 0, "a huge delay fired")
        #expect(limits.allSatisfy { $0.peek() == nil }, "a huge limit fired")
        let ran = Deferred<Void>()
        queues[0].queue.submit(after: .microseconds(200)) { ran.fill() }
        #expect(ran.wait(for: .seconds(10)) != nil, "a short body behind huge ones")
        for limit in limits { limit.cancel() }
    }
}
