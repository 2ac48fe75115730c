import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

extension StressSuites {
    /// Fresh-eye attacks on time limits kept in a loop's own heap (`TimerScheduling`): a limit
    /// withdrawn as its attempt finishes, run when due, abandoned when the loop shuts down; the
    /// heap's purge of withdrawn timers, its integer keys and the extremes of delays; through the
    /// public API only.
    @Suite struct LoopLimitAttackTests {
        /// Rounds of each two-thread race (fewer under a sanitizer).
        static var rounds: Int { TestSize.sanitized(800) }

        // MARK: Fixtures

        /// A writer that any thread can finish or let go of; locks with `NSLock` (not `Mutex`,
        /// which ThreadSanitizer misreads).
        final class WriterSlot: @unchecked Sendable {
            private let lock = NSLock()
            private var writer: HeldWriter<Int, TestError>?
            let attempt: Attempt<Int, TestError>

            init() {
                let writer = HeldWriter<Int, TestError>()
                attempt = writer.attempt
                self.writer = writer
            }

            private var current: HeldWriter<Int, TestError>? {
                lock.lock()
                defer { lock.unlock() }
                return writer
            }

            /// Lets go of the writer: its attempt loses its source.
            func lose() {
                lock.lock()
                let writer = self.writer
                self.writer = nil
                lock.unlock()
                blackHole(writer)
            }

            @discardableResult func succeed(_ value: Int) -> Bool { current?.succeed(with: value) ?? false }
            @discardableResult func fail(_ error: TestError) -> Bool { current?.fail(with: error) ?? false }
            var isCancelled: Bool { attempt.isCancelled }
        }

        /// What a consumer's tracked handler saw: how often it ran, what it saw, and whether its
        /// captures are still alive.
        final class Outcome: Sendable {
            let runs = Counter()
            let code = Atomic<Int>(0)
            let live = LiveCount()

            static let success = 1, timedOut = 2, cancelled = 3, failed = 4, other = 5

            /// Adds a handler to `attempt` (of the writer's value plus one) that records what it saw
            /// and captures a tracked object.
            func track(_ attempt: Attempt<Int, TestError>, expecting value: Int = 2) {
                let tracked = LifetimeTracked(live)
                attempt.upon(.immediate) { [self] result in
                    _ = tracked
                    runs.increment()
                    let seen: Int
                    switch result {
                    case .success(let v): seen = v == value ? Self.success : Self.other
                    case .failure(.timedOut): seen = Self.timedOut
                    case .failure(.cancelled): seen = Self.cancelled
                    case .failure(.failed(1)): seen = Self.failed
                    case .failure: seen = Self.other
                    }
                    code.store(seen, ordering: .releasing)
                }
            }

            /// Names what happened, once the handler ran or everything was released (or neither,
            /// within `seconds`).
            func settle(within seconds: Double = 10) -> String {
                _ = holds(within: seconds) { runs.value > 0 || live.value == 0 }
                if runs.value == 0 {
                    return live.value == 0 ? "orphaned" : "pending, handler held"
                }
                // The handler ran: its captures must go too.
                _ = holds(within: seconds) { live.value == 0 }
                if runs.value > 1 { return "handler ran \(runs.value) times" }
                if live.value != 0 { return "ran but its captures are held" }
                switch code.load(ordering: .acquiring) {
                case Self.success: return "succeeded"
                case Self.timedOut: return "timed out"
                case Self.cancelled: return "cancelled"
                case Self.failed: return "failed"
                default: return "wrong result \(code.load(ordering: .acquiring))"
                }
            }
        }

        /// Settles outcomes one after another, waiting up to ten seconds for the first that is
        /// slow, and only briefly after one was found stuck: a broken build fails in seconds, not
        /// in ten seconds a round.
        struct Settler {
            private var patience = 10.0
            mutating func settle(_ outcome: Outcome) -> String {
                let seen = outcome.settle(within: patience)
                if seen.hasPrefix("pending") || seen.hasSuffix("held") { patience = 0.01 }
                return seen
            }
        }

        /// A random number of pause steps: none, a few, or up to about `scale`.
        static func pause(_ random: inout SplitMix, scale: UInt64) {
            let scales: [UInt64] = [1, 64, 1_024, scale / 8, scale]
            let s = scales[Int(random.next() % UInt64(scales.count))]
            RaceHarness.pause(Int(random.next() % max(1, s)))
        }

        /// Spins until `condition` holds, yielding now and then (the other side may not be running).
        static func spin(until condition: () -> Bool) {
            var spins = 0
            while !condition() {
                spins &+= 1
                if spins & 0x3FF == 0 { sched_yield() }
            }
        }

        // MARK: A limit firing against its attempt finishing

        enum Ending: String, CaseIterable, CustomTestStringConvertible, Sendable {
            case succeed, fail, cancel, loseWriter
            var testDescription: String { rawValue }
        }

        final class FinishRace: @unchecked Sendable {
            let slot = WriterSlot()
            let outcome = Outcome()
            let limit: Duration
            let ready = Atomic<Bool>(false)
            // Written by the left side before `ready`, read by the right after it.
            var consumer: Attempt<Int, TestError>?
            let loop: LoopExecutor
            init(loop: LoopExecutor, limit: Duration) {
                self.loop = loop
                self.limit = limit
            }
        }

        /// A limit of a few microseconds on a loop fires while its attempt succeeds, fails, is
        /// cancelled by its consumer or loses its writer: the consumer's handler runs exactly once,
        /// with the source's result, its own cancellation, or the timeout (which a lost writer
        /// always gives: the attempt keeps itself for its limit), and its captures are released.
        @Test(arguments: Ending.allCases)
        func aLimitFiringRacesItsAttemptFinishing(_ ending: Ending) {
            let loop = LoopExecutor(name: "limit-vs-finish")
            defer { loop.shutdown() }
            var random = SplitMix(seed: TestSize.seed)
            var counts: [String: Int] = [:]
            var sourceKeptRunning = 0
            for _ in 0..<max(1, Self.rounds / 100) {
                let fixtures = (0..<100).map { _ in
                    FinishRace(loop: loop, limit: .microseconds(Int64(1 + random.next() % 120)))
                }
                RaceHarness.run(
                    fixtures,
                    left: { f in
                        let consumer = f.slot.attempt.timeout(after: f.limit, upon: f.loop, failingWith: .timedOut)
                            .map(upon: .immediate) { $0 + 1 }
                        f.outcome.track(consumer)
                        f.consumer = consumer
                        f.ready.store(true, ordering: .releasing)
                    },
                    right: { f in
                        var random = SplitMix(seed: .random(in: 1...UInt64.max))
                        Self.spin { f.ready.load(ordering: .acquiring) }
                        Self.pause(&random, scale: 60_000)
                        switch ending {
                        case .succeed: f.slot.succeed(1)
                        case .fail: f.slot.fail(.failed(1))
                        case .cancel: f.consumer?.cancel()
                        case .loseWriter:
                            f.consumer = nil
                            f.slot.lose()
                        }
                    })
                var settler = Settler()
                for f in fixtures {
                    let outcome = settler.settle(f.outcome)
                    counts[outcome, default: 0] += 1
                    // A timeout stops its source (or the source finished as the limit claimed the
                    // timeout); a lost writer's source is lost, not stopped.
                    if outcome == "timed out", ending != .loseWriter, f.slot.attempt.peek() == nil {
                        sourceKeptRunning += 1
                    }
                }
            }
            progress("loop limit against \(ending): \(counts)")
            let allowed: Set<String> =
                switch ending {
                case .succeed: ["succeeded", "timed out"]
                case .fail: ["failed", "timed out"]
                case .cancel: ["cancelled", "timed out"]
                case .loseWriter: ["timed out"]
                }
            #expect(Set(counts.keys).isSubset(of: allowed), "\(ending): \(counts)")
            #expect(sourceKeptRunning == 0, "\(sourceKeptRunning) timeouts left their source running")
        }

        /// The consumer leaves (drops its attempt, which no handler holds) as the limit fires: what
        /// the chain captured is released whatever comes first, and the loop goes on timing.
        @Test func aConsumerLeavingAsItsLimitFiresReleasesEverything() {
            let loop = LoopExecutor(name: "leaving")
            defer { loop.shutdown() }
            final class Round: @unchecked Sendable {
                let slot = WriterSlot()
                let live = LiveCount()
                let limit: Duration
                let ready = Atomic<Bool>(false)
                // Written by the left side before `ready`, by the right after it.
                var consumer: Attempt<Int, TestError>?
                init(_ limit: Duration) { self.limit = limit }
            }
            var random = SplitMix(seed: TestSize.seed ^ 0xABCD)
            var held = 0
            for _ in 0..<max(1, Self.rounds / 100) {
                let rounds = (0..<100).map { _ in Round(.microseconds(Int64(1 + random.next() % 100))) }
                RaceHarness.run(
                    rounds,
                    left: { r in
                        let tracked = LifetimeTracked(r.live)
                        r.consumer = r.slot.attempt.map(upon: .immediate) { v in
                            _ = tracked
                            return v
                        }
                        .timeout(after: r.limit, upon: loop, failingWith: .timedOut)
                        .map(upon: .immediate) { $0 + 1 }
                        r.ready.store(true, ordering: .releasing)
                    },
                    right: { r in
                        Self.spin { r.ready.load(ordering: .acquiring) }
                        RaceHarness.pause(Int.random(in: 0..<50_000))
                        r.consumer = nil
                    })
                for r in rounds {
                    // The writer lives on: only the chain below it holds the capture.
                    if !holds(within: held == 0 ? 10 : 0.01, { r.live.value == 0 }) { held += 1 }
                }
                withExtendedLifetime(rounds) {}
            }
            #expect(held == 0, "\(held) chains kept their captures after the consumer left")
            let ran = Deferred<Void>()
            loop.submit(after: .milliseconds(1)) { ran.fill() }
            #expect(ran.value(within: 10) != nil)
        }

        // MARK: A limit firing against shutdown against the writer going

        final class ShutdownRace: @unchecked Sendable {
            let loop = LoopExecutor(name: "limit-shutdown")
            let slot = WriterSlot()
            let outcome = Outcome()
            let limit: Duration
            init(_ limit: Duration) { self.limit = limit }
        }

        /// A limit of a few microseconds fires while its writer is lost or finishes and its loop
        /// shuts down.
        ///
        /// Three parties: the loop firing the limit, a thread that sets it and then loses (or
        /// finishes) the writer, and a thread that shuts the loop down. With the writer lost the
        /// consumer times out or is orphaned, and either way is released; with the writer
        /// finishing it succeeds or times out; never run twice, never left pending.
        @Test(arguments: [false, true])
        func aLimitFiringRacesShutdownAndItsWriter(writerSucceeds: Bool) {
            var counts: [String: Int] = [:]
            var random = SplitMix(seed: TestSize.seed ^ 0x5151)
            for _ in 0..<max(1, Self.rounds / 2 / 50) {
                let fixtures = (0..<50).map { _ in ShutdownRace(.microseconds(Int64(1 + random.next() % 150))) }
                RaceHarness.run(
                    fixtures,
                    left: { f in
                        var random = SplitMix(seed: .random(in: 1...UInt64.max))
                        let consumer = f.slot.attempt.timeout(after: f.limit, upon: f.loop, failingWith: .timedOut)
                            .map(upon: .immediate) { $0 + 1 }
                        f.outcome.track(consumer)
                        Self.pause(&random, scale: 60_000)
                        if writerSucceeds {
                            f.slot.succeed(1)
                        } else {
                            f.slot.lose()
                        }
                    },
                    right: { f in
                        var random = SplitMix(seed: .random(in: 1...UInt64.max))
                        Self.pause(&random, scale: 60_000)
                        f.loop.shutdown()
                    })
                var settler = Settler()
                for f in fixtures {
                    #expect(f.loop.shutdown().value(within: 30) != nil, "the loop's thread exited")
                    counts[settler.settle(f.outcome), default: 0] += 1
                }
            }
            progress("loop limit against shutdown and writer (succeeds \(writerSucceeds)): \(counts)")
            let allowed: Set<String> = writerSucceeds ? ["succeeded", "timed out"] : ["timed out", "orphaned"]
            #expect(Set(counts.keys).isSubset(of: allowed), "\(counts)")
        }

        /// Many threads set limits on one loop while it shuts down.
        ///
        /// The limits are zero, a nanosecond, microseconds, an hour and the far future; then half
        /// the writers succeed and half are lost. Each consumer is decided exactly once, or
        /// orphaned, and released.
        @Test func limitsSetFromManyThreadsWhileTheLoopShutsDown() {
            final class Request: Sendable {
                let slot = WriterSlot()
                let outcome = Outcome()
            }
            final class Made: @unchecked Sendable {
                let lock = NSLock()
                var requests: [Request] = []
                var consumers: [Attempt<Int, TestError>] = []
            }
            let limits: [Duration] = [
                .zero, .nanoseconds(1), .microseconds(3), .microseconds(50), .milliseconds(1), .seconds(3_600),
                .seconds(Int64.max), .nanoseconds(-5),
            ]
            var counts: [String: Int] = [:]
            let perThread = TestSize.sanitized(400)
            for round in 0..<6 {
                let loop = LoopExecutor(name: "many-setters")
                let made = Made()
                let threads = 3
                let go = Atomic<Int>(0)
                let finished = DispatchGroup()
                for t in 0..<threads {
                    finished.enter()
                    Thread {
                        go.add(1, ordering: .acquiringAndReleasing)
                        while go.load(ordering: .acquiring) < threads + 1 {}
                        for i in 0..<perThread {
                            let request = Request()
                            let limit = limits[(i &* 7 &+ t &+ round) % limits.count]
                            let consumer = request.slot.attempt.timeout(
                                after: limit, upon: loop, failingWith: .timedOut
                            )
                            .map(upon: .immediate) { $0 + 1 }
                            request.outcome.track(consumer)
                            made.lock.lock()
                            made.requests.append(request)
                            made.consumers.append(consumer)
                            made.lock.unlock()
                        }
                        finished.leave()
                    }.start()
                }
                go.add(1, ordering: .acquiringAndReleasing)
                while go.load(ordering: .acquiring) < threads + 1 {}
                usleep(UInt32(200 + round * 300))
                loop.shutdown()
                finished.wait()
                #expect(loop.shutdown().value(within: 30) != nil)
                let requests = made.requests
                made.consumers.removeAll()
                for (i, request) in requests.enumerated() {
                    if i % 2 == 0 { request.slot.succeed(1) } else { request.slot.lose() }
                }
                var settler = Settler()
                for (i, request) in requests.enumerated() {
                    let outcome = settler.settle(request.outcome)
                    counts["\(i % 2 == 0 ? "succeeding" : "lost"): \(outcome)", default: 0] += 1
                }
            }
            progress("limits set from \(3) threads as the loop shuts down: \(counts)")
            let allowed: Set<String> = [
                "succeeding: succeeded", "succeeding: timed out", "lost: timed out", "lost: orphaned",
            ]
            #expect(Set(counts.keys).isSubset(of: allowed), "\(counts)")
        }

        /// A limit already due when the loop shuts down still fires (the loop runs what is due
        /// before its thread ends), even while the loop was busy with a body; one not due is
        /// abandoned, and its attempt is still decided by its source.
        @Test func aLimitDueAtShutdownFiresAndOneNotDueIsAbandoned() {
            for _ in 0..<TestSize.sanitized(20) {
                let loop = LoopExecutor(name: "due-at-shutdown")
                let block = holdThread(of: loop)
                let due = (WriterSlot(), Outcome())
                let notDue = (WriterSlot(), Outcome())
                due.1.track(
                    due.0.attempt.timeout(after: .milliseconds(1), upon: loop, failingWith: .timedOut)
                        .map(upon: .immediate) { $0 + 1 })
                notDue.1.track(
                    notDue.0.attempt.timeout(after: .seconds(60), upon: loop, failingWith: .timedOut)
                        .map(upon: .immediate) { $0 + 1 })
                Thread.sleep(forTimeInterval: 0.005)
                loop.shutdown()
                #expect(due.1.runs.value == 0 && notDue.1.runs.value == 0)
                block.signal()
                #expect(loop.shutdown().value(within: 30) != nil)
                #expect(due.1.settle() == "timed out", "the due limit ran before the thread ended")
                #expect(due.0.isCancelled)
                #expect(notDue.1.runs.value == 0, "an abandoned limit decides nothing")
                notDue.0.succeed(1)
                #expect(notDue.1.settle() == "succeeded")
            }
        }

        /// A limit set on a loop already shut down is lost at once: the source still decides the
        /// attempt, the consumer still cancels it, and with its writer lost too it is orphaned
        /// and released; nothing runs twice.
        ///
        /// A limit of zero or less has passed as it is set and needs no loop: it times the
        /// attempt out at once.
        @Test func aLimitOnALoopAlreadyShutDown() {
            let loop = LoopExecutor(name: "already-down")
            #expect(loop.shutdown().value(within: 30) != nil)
            let limits: [Duration] = [
                .nanoseconds(1), .microseconds(1), .milliseconds(5), .seconds(3_600), .seconds(Int64.max), .zero,
                .seconds(-1),
            ]
            var bad: [String] = []
            for limit in limits {
                for ending in ["succeed", "lose", "cancel", "loseThenCancel"] {
                    let slot = WriterSlot()
                    let outcome = Outcome()
                    var consumer: Attempt<Int, TestError>? = slot.attempt
                        .timeout(after: limit, upon: loop, failingWith: .timedOut)
                        .map(upon: .immediate) { $0 + 1 }
                    outcome.track(consumer!)
                    if limit <= .zero {
                        if outcome.runs.value != 1 || !slot.attempt.isCancelled {
                            bad.append("\(limit) \(ending): not timed out at once (\(outcome.settle()))")
                        }
                        continue
                    }
                    Thread.sleep(forTimeInterval: 0.002)
                    if outcome.runs.value != 0 {
                        bad.append("\(limit) \(ending): decided before its source (\(outcome.settle()))")
                        continue
                    }
                    let expected: String
                    switch ending {
                    case "succeed":
                        slot.succeed(1)
                        expected = "succeeded"
                    case "lose":
                        consumer = nil
                        slot.lose()
                        expected = "orphaned"
                    case "cancel":
                        consumer?.cancel()
                        expected = "cancelled"
                    default:
                        // The limit was lost at once: losing the writer too orphans the attempt,
                        // which a later cancel cannot decide.
                        slot.lose()
                        consumer?.cancel()
                        expected = "orphaned"
                    }
                    let seen = outcome.settle(within: 5)
                    if seen != expected {
                        bad.append("\(limit) \(ending): \(seen), expected \(expected)")
                    }
                    withExtendedLifetime(consumer) {}
                }
            }
            #expect(bad.isEmpty, "\(bad)")
        }

        /// A limit's own handler, on the loop's thread, sets more limits on the loop and shuts it
        /// down, or lets go of the last reference to it (the loop shuts down from its own thread,
        /// inside the timer it runs): the limits it abandons are lost at once, their attempts
        /// still decided by their sources or orphaned, and everything released.
        @Test(arguments: [false, true])
        func aLimitsHandlerShutsItsOwnLoopDown(byReleasingIt: Bool) {
            final class Holder: @unchecked Sendable {
                let lock = NSLock()
                var loop: LoopExecutor?
                var requests: [(WriterSlot, Outcome)] = []
                func take() -> LoopExecutor? {
                    lock.lock()
                    defer { lock.unlock() }
                    let loop = self.loop
                    self.loop = nil
                    return loop
                }
            }
            var counts: [String: Int] = [:]
            for round in 0..<TestSize.sanitized(40) {
                let holder = Holder()
                holder.loop = LoopExecutor(name: "self-shutdown")
                let trigger = WriterSlot()
                let done = Deferred<Void>()
                let weakLoop = Box(holder.loop.map { WeakLoop($0) })
                trigger.attempt.timeout(
                    after: .microseconds(Int64(10 + round)), upon: holder.loop!, failingWith: .timedOut
                )
                .upon(.immediate) { _ in
                    // On the loop's thread: more limits, some due at once, then the end.
                    guard let loop = weakLoop.value?.loop else { return }
                    for i in 0..<20 {
                        let slot = WriterSlot()
                        let outcome = Outcome()
                        let limit: Duration = i % 3 == 0 ? .nanoseconds(1) : i % 3 == 1 ? .zero : .seconds(3_600)
                        outcome.track(
                            slot.attempt.timeout(after: limit, upon: loop, failingWith: .timedOut)
                                .map(upon: .immediate) { $0 + 1 })
                        holder.lock.withLock { holder.requests.append((slot, outcome)) }
                    }
                    if byReleasingIt {
                        blackHole(holder.take())
                    } else {
                        loop.shutdown()
                    }
                    done.fill()
                }
                #expect(done.value(within: 30) != nil)
                if !byReleasingIt {
                    _ = holder.take()?.shutdown().value(within: 30)
                }
                #expect(holds(within: 10) { weakLoop.value?.loop == nil }, "the loop was released")
                let requests = holder.lock.withLock { holder.requests }
                for (i, (slot, _)) in requests.enumerated() {
                    if i % 2 == 0 { slot.succeed(1) } else { slot.lose() }
                }
                var settler = Settler()
                for (i, (_, outcome)) in requests.enumerated() {
                    counts["\(i % 2 == 0 ? "succeeding" : "lost"): \(settler.settle(outcome))", default: 0] += 1
                }
            }
            progress("limits set by a limit's handler that shuts its loop down (releasing \(byReleasingIt)): \(counts)")
            let allowed: Set<String> = [
                "succeeding: succeeded", "succeeding: timed out", "lost: timed out", "lost: orphaned",
            ]
            #expect(Set(counts.keys).isSubset(of: allowed), "\(counts)")
        }

        final class WeakLoop: @unchecked Sendable {
            weak var loop: LoopExecutor?
            init(_ loop: LoopExecutor) { self.loop = loop }
        }

        final class Box<T>: @unchecked Sendable {
            let value: T
            init(_ value: T) { self.value = value }
        }

        // MARK: Withdrawn limits and the purge

        /// Thousands of long limits beaten (withdrawn), among a few that stay live, then one short
        /// limit, while more long limits are set and beaten (the purge passes run): the short limit
        /// fires on time, never before it is due.
        @Test func aShortLimitFiresOnTimeAmongThousandsOfBeatenOnes() {
            let loop = LoopExecutor(name: "purge")
            defer { loop.shutdown() }
            let beatenBefore = TestSize.sanitized(20_000)
            var liveWriters: [WriterSlot] = []
            func setAndBeat(_ count: Int, limit: (Int) -> Duration) {
                for i in 0..<count {
                    let slot = WriterSlot()
                    let attempt = slot.attempt.timeout(after: limit(i), upon: loop, failingWith: .timedOut)
                    if i % 500 == 0 {
                        liveWriters.append(slot)  // a few stay live: the purge keeps them
                        attempt.upon(.immediate) { _ in }
                    } else {
                        slot.succeed(i)
                    }
                }
            }
            var lateness: [Duration] = []
            var early: [Duration] = []
            for trial in 0..<4 {
                // Beaten limits an hour long, and (trial 1, 3) beaten ones due before the short one,
                // which the loop must drop at the front rather than wake for.
                setAndBeat(beatenBefore / 2) { i in
                    trial % 2 == 1 && i % 2 == 0 ? .milliseconds(5) : .seconds(3_600 + i)
                }
                let short = Duration.milliseconds(20)
                let slot = WriterSlot()
                let fired = Deferred<ContinuousClock.Instant>()
                let start = ContinuousClock.now
                slot.attempt.timeout(after: short, upon: loop, failingWith: .timedOut).upon(.immediate) { result in
                    if case .failure(.timedOut) = result { fired.fill(with: ContinuousClock.now) }
                }
                // More beaten limits while the short one waits: passes that drop withdrawn timers.
                setAndBeat(beatenBefore / 2) { .seconds(7_200 + $0) }
                guard let at = fired.value(within: 30) else {
                    Issue.record("trial \(trial): the short limit never fired")
                    continue
                }
                let elapsed = start.duration(to: at)
                if elapsed < short { early.append(elapsed) }
                lateness.append(elapsed - short)
                #expect(slot.isCancelled, "the limit stopped the work")
            }
            progress("short limit among beaten ones: late by \(lateness)")
            #expect(early.isEmpty, "fired before its limit: \(early)")
            // Generous: a loaded machine may be late, a blocked limit is seconds late or never fires.
            #expect(lateness.allSatisfy { $0 < .seconds(2) }, "\(lateness)")
            // The live long limits still decide nothing early and their sources still can.
            for (i, slot) in liveWriters.enumerated() { slot.succeed(i) }
            #expect(liveWriters.allSatisfy { $0.attempt.peek() != nil })
        }

        /// Bodies and limits mixed in one heap run by deadline, then submission: a limit's timeout
        /// handler (immediate, on the loop) and delayed bodies interleave as their deadlines say.
        ///
        /// Each submission's deadline lies between the clock read just before and just after it,
        /// so the check holds on a loaded machine: of two submissions, the one whose deadline is
        /// surely earlier runs first, and with equal delays (or a later one's longer delay) the
        /// one submitted first runs first.
        @Test func delayedBodiesAndLimitsKeepDeadlineThenSubmissionOrder() {
            final class Log: @unchecked Sendable {
                let lock = NSLock()
                var seen: [Int] = []
                func record(_ i: Int) {
                    lock.lock()
                    seen.append(i)
                    lock.unlock()
                }
            }
            let loop = LoopExecutor(name: "mixed order")
            defer { loop.shutdown() }
            let block = holdThread(of: loop)
            let log = Log()
            var writers: [WriterSlot] = []
            var submitted: [(before: ContinuousClock.Instant, after: ContinuousClock.Instant, delay: Duration)] = []
            let count = 120
            func submit(_ i: Int, after delay: Duration) {
                let before = ContinuousClock.now
                if i % 2 == 0 {
                    loop.submit(after: delay) { log.record(i) }
                } else {
                    let slot = WriterSlot()
                    writers.append(slot)
                    slot.attempt.timeout(after: delay, upon: loop, failingWith: .timedOut).upon(.immediate) { r in
                        if case .failure(.timedOut) = r { log.record(i) }
                    }
                }
                submitted.append((before, .now, delay))
            }
            // Later ones due earlier, a millisecond apart: even ones bodies, odd ones limits.
            for i in 0..<count {
                submit(i, after: .milliseconds(count + 1 - i))
            }
            // Then equal delays, and some a nanosecond apart.
            for i in count..<(2 * count) {
                submit(i, after: i % 3 == 0 ? .milliseconds(count + 2) : .nanoseconds(Int64(count + 2) * 1_000_000 + 1))
            }
            Thread.sleep(forTimeInterval: Double(count + 40) / 1_000)
            block.signal()
            let done = Deferred<Void>()
            loop.submit(after: .milliseconds(1)) { done.fill() }
            #expect(done.value(within: 30) != nil)
            let result = log.lock.withLock { log.seen }
            #expect(Set(result) == Set(0..<(2 * count)) && result.count == 2 * count, "\(result.count) ran")
            var position = [Int: Int]()
            for (p, i) in result.enumerated() { position[i] = p }
            var wrong: [String] = []
            for a in 0..<submitted.count {
                for b in (a + 1)..<submitted.count {
                    guard let pa = position[a], let pb = position[b] else { continue }
                    let (sa, sb) = (submitted[a], submitted[b])
                    // b was submitted after a: with a delay no shorter, its deadline is no sooner.
                    let aFirst = sb.delay >= sa.delay || sb.before + sb.delay > sa.after + sa.delay
                    let bFirst = sb.after + sb.delay < sa.before + sa.delay
                    if aFirst && pb < pa { wrong.append("\(b) ran before \(a)") }
                    if bFirst && pa < pb { wrong.append("\(a) ran before \(b)") }
                }
            }
            #expect(wrong.isEmpty, "\(wrong.count) pairs out of order, e.g. \(wrong.prefix(5))")
            withExtendedLifetime(writers) {}
        }

        // MARK: Extreme limits

        /// Limits far in the future never fire and never block the loop; the tiniest, zero and
        /// negative ones fire promptly; none traps; a limit fires no sooner than it is due.
        @Test func extremeLimitsNeitherTrapNorFireEarly() {
            let loop = LoopExecutor(name: "extremes")
            let far: [Duration] = [
                .seconds(Int64.max),
                Duration(secondsComponent: Int64.max, attosecondsComponent: 999_999_999_999_999_999),
                .nanoseconds(Int64.max), .seconds(9_000_000_000), .seconds(8_999_999_999), .seconds(1_000_000_000),
                .seconds(999_999_999),
            ]
            let soon: [Duration] = [
                .nanoseconds(1), Duration(secondsComponent: 0, attosecondsComponent: 1), .zero, .nanoseconds(-1),
                .seconds(-1), .seconds(Int64.min), .nanoseconds(Int64.min), .microseconds(1),
            ]
            var farSlots: [(Duration, WriterSlot, Outcome)] = []
            for limit in far {
                let slot = WriterSlot()
                let outcome = Outcome()
                outcome.track(
                    slot.attempt.timeout(after: limit, upon: loop, failingWith: .timedOut).map(upon: .immediate) {
                        $0 + 1
                    })
                farSlots.append((limit, slot, outcome))
                // A body just as far away too.
                let live = outcome.live
                let tracked = LifetimeTracked(live)
                loop.submit(after: limit) { _ = tracked }
            }
            for limit in soon {
                let slot = WriterSlot()
                let outcome = Outcome()
                outcome.track(
                    slot.attempt.timeout(after: limit, upon: loop, failingWith: .timedOut).map(upon: .immediate) {
                        $0 + 1
                    })
                #expect(outcome.settle() == "timed out", "\(limit)")
                #expect(slot.isCancelled, "\(limit)")
            }
            for ms in [1, 7, 30] {
                let slot = WriterSlot()
                let fired = Deferred<ContinuousClock.Instant>()
                let start = ContinuousClock.now
                slot.attempt.timeout(after: .milliseconds(ms), upon: loop, failingWith: .timedOut).upon(.immediate) {
                    _ in
                    fired.fill(with: .now)
                }
                let at = fired.value(within: 10)
                #expect(at.map { start.duration(to: $0) >= .milliseconds(ms) } == true, "\(ms) ms")
            }
            Thread.sleep(forTimeInterval: 0.02)
            #expect(farSlots.allSatisfy { $0.2.runs.value == 0 }, "a far limit fired")
            // Their sources still decide half of them; shutdown abandons the others' limits and
            // releases the far bodies.
            for (i, (_, slot, _)) in farSlots.enumerated() where i % 2 == 0 { slot.succeed(1) }
            #expect(loop.shutdown().value(within: 10) != nil)
            for (i, (limit, slot, outcome)) in farSlots.enumerated() where i % 2 == 1 {
                #expect(outcome.runs.value == 0, "\(limit): decided by its abandoned limit")
                slot.succeed(1)
            }
            for (limit, _, outcome) in farSlots {
                #expect(outcome.settle() == "succeeded", "\(limit)")
            }
        }

        // MARK: Groups and chains

        /// Requests pinned per loop of a group: stages, limits and callbacks on the request's loop;
        /// half are beaten, half time out; each decided once, on its loop.
        @Test func limitsOnAGroupStayOnTheirLoops() {
            let group = LoopGroup(loops: 3, name: "pinned")
            final class Request: @unchecked Sendable {
                let slot = WriterSlot()
                let runs = Counter()
                let code = Atomic<Int>(0)  // 1 success on loop, 2 timeout on loop, 3 wrong loop, 4 other
            }
            let count = TestSize.sanitized(3_000)
            let requests = (0..<count).map { _ in Request() }
            for (i, request) in requests.enumerated() {
                let loop = group.next()
                let others = group.loops.filter { $0 !== loop }
                let limit: Duration = i % 2 == 0 ? .seconds(60) : .microseconds(Int64(i % 200))
                request.slot.attempt
                    .map(upon: loop) { $0 + 1 }
                    .timeout(after: limit, upon: loop, failingWith: .timedOut)
                    .map(upon: loop) { $0 * 2 }
                    .upon(loop) { result in
                        let onLoop = loop.isCurrent && !others.contains { $0.isCurrent }
                        let code: Int
                        switch result {
                        case .success(4): code = onLoop ? 1 : 3
                        case .failure(.timedOut): code = onLoop ? 2 : 3
                        default: code = 4
                        }
                        // The code first: the test reads it once it sees the run counted.
                        request.code.store(code, ordering: .releasing)
                        request.runs.increment()
                    }
                if i % 2 == 0 { request.slot.succeed(1) }
            }
            let decided = holds(within: 30) { requests.allSatisfy { $0.runs.value > 0 } }
            #expect(decided)
            Thread.sleep(forTimeInterval: 0.01)
            var counts: [String: Int] = [:]
            for (i, request) in requests.enumerated() {
                let name =
                    switch (i % 2, request.code.load(ordering: .acquiring), request.runs.value) {
                    case (0, 1, 1): "beaten"
                    case (1, 2, 1): "timed out"
                    case (1, 1, 1): "unexpected success"
                    case (_, let c, let r): "bad: code \(c), runs \(r)"
                    }
                counts[name, default: 0] += 1
            }
            progress("limits on a group: \(counts)")
            #expect(counts.keys.allSatisfy { $0 == "beaten" || $0 == "timed out" }, "\(counts)")
            #expect(group.shutdown().value(within: 10) != nil)
        }

        /// A chain of 10,000 `map` stages, then a limit on a loop: it times out and stops the
        /// source at the top (a stop 10,000 levels up, from the loop's thread, without recursion),
        /// or the source's value comes through.
        @Test(arguments: [false, true])
        func aLoopLimitBelowTenThousandMaps(succeed: Bool) async {
            let loop = LoopExecutor(name: "deep")
            defer { loop.shutdown() }
            let slot = WriterSlot()
            let live = LiveCount()
            let result = await onDeepStack("10,000 maps then a loop limit") { () -> String in
                let tracked = LifetimeTracked(live)
                var attempt = slot.attempt.map(upon: .immediate) { v in
                    _ = tracked
                    return v
                }
                for _ in 0..<10_000 {
                    attempt = attempt.map(upon: .immediate) { $0 + 1 }
                }
                let done = Deferred<Result<Int, TestError>>()
                attempt.timeout(after: succeed ? .seconds(60) : .milliseconds(20), upon: loop, failingWith: .timedOut)
                    .upon(.immediate) { done.fill(with: $0) }
                if succeed { slot.succeed(0) }
                switch done.value(within: 60) {
                case nil: return "no result"
                case .success(let v)?: return "success \(v)"
                case .failure(let e)?: return "\(e)"
                }
            }
            #expect(result == (succeed ? "success 10000" : "timedOut"))
            if !succeed {
                #expect(slot.isCancelled, "the stop reached the source")
            }
            #expect(holds(within: 10) { live.value == 0 }, "the chain's captures were released")
        }
    }
}
