import Deferred
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

/// Attacks on the shared Dispatch timer heap (`submit(after:)`, `timeout` on a queue) and on
/// the joins' raw slots, through the public API only (adopted from a fresh-eye attack).
@Suite(.serialized) struct DispatchTimersAttackTests {
    // MARK: Helpers

    static let key = DispatchSpecificKey<Int>()

    /// How often each body ran, whether it ran early, and off its queue.
    final class Ledger: @unchecked Sendable {
        final class Cell: Sendable { let count = Atomic<Int>(0) }
        let runs: [Cell]
        let early = Atomic<Int>(0)
        let elsewhere = Atomic<Int>(0)
        let total = Atomic<Int>(0)
        let maxLate = Atomic<UInt64>(0)

        init(count: Int) {
            runs = (0..<count).map { _ in Cell() }
        }

        func ran(_ index: Int, due: UInt64, onQueue: Bool) {
            let now = DispatchTime.now().uptimeNanoseconds
            if now < due {
                early.wrappingAdd(1, ordering: .relaxed)
            } else {
                maxLate.max(now - due, ordering: .relaxed)
            }
            if !onQueue {
                elsewhere.wrappingAdd(1, ordering: .relaxed)
            }
            runs[index].count.wrappingAdd(1, ordering: .relaxed)
            total.wrappingAdd(1, ordering: .releasing)
        }

        var twice: Int { runs.filter { $0.count.load(ordering: .relaxed) > 1 }.count }
        var never: Int { runs.filter { $0.count.load(ordering: .relaxed) == 0 }.count }
    }

    static func nanos(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        return UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
    }

    /// Whether `done` becomes true within `seconds`.
    static func eventually(within seconds: Int = 30, _ done: () -> Bool) -> Bool {
        let end = ContinuousClock.now + .seconds(seconds)
        while !done() {
            guard ContinuousClock.now < end else {
                return false
            }
            usleep(1_000)
        }
        return true
    }

    /// Runs `body` on `threads` threads started at once, each with its index.
    static func onThreads(_ threads: Int, stackSize: Int? = nil, _ body: @escaping @Sendable (Int) -> Void) {
        let group = DispatchGroup()
        let gate = DispatchSemaphore(value: 0)
        for index in 0..<threads {
            group.enter()
            let thread = Thread {
                gate.wait()
                body(index)
                group.leave()
            }
            if let stackSize {
                thread.stackSize = stackSize
            }
            thread.start()
        }
        for _ in 0..<threads {
            gate.signal()
        }
        group.wait()
    }

    /// CPU time this process used so far, in nanoseconds.
    static func cpuTime() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }

    /// A class element with a live count, to catch leaks and double releases of join slots.
    final class Tracked: Sendable {
        static let live = Atomic<Int>(0)
        static let minimum = Atomic<Int>(0)
        let value: Int
        init(_ value: Int) {
            self.value = value
            Self.live.wrappingAdd(1, ordering: .relaxed)
        }
        deinit {
            let now = Self.live.wrappingSubtract(1, ordering: .relaxed).newValue
            Self.minimum.min(now, ordering: .relaxed)
        }
    }

    /// Whether every tracked value is released within five seconds (threads that ran a race
    /// release their closures, and the values those capture, a moment after they finish).
    static func released() -> Bool {
        eventually(within: 5) { Tracked.live.load(ordering: .relaxed) == 0 }
    }

    // MARK: The heap

    /// Four threads schedule ever earlier deadlines (and random ones) on three queues while
    /// earlier bodies fire: each body runs once, on its queue, never early.
    @Test func everEarlierDeadlinesFromManyThreadsWhileFiringAreNeitherEarlyLostNorDoubled() {
        let threads = 4
        let perThread = 10_000
        let ledger = Ledger(count: threads * perThread)
        let queues = (0..<3).map { index in
            let queue = DispatchQueue(label: "attack.\(index)", attributes: index == 0 ? .concurrent : [])
            queue.setSpecific(key: Self.key, value: index + 1)
            return queue
        }
        Self.onThreads(threads) { thread in
            var random = SplitMix(seed: .random(in: 1...UInt64.max))
            for step in 0..<perThread {
                let index = thread * perThread + step
                let micros =
                    step.isMultiple(of: 3)
                    ? Int(random.next() % 3_000) + 1  // random
                    : max(1, 2_000 - (step % 2_000))  // ever earlier
                let delay = Duration.microseconds(micros)
                let mark = index % 3
                let due = DispatchTime.now().uptimeNanoseconds + Self.nanos(delay)
                queues[mark].submit(after: delay) {
                    ledger.ran(index, due: due, onQueue: DispatchQueue.getSpecific(key: Self.key) == mark + 1)
                }
                if step.isMultiple(of: 64) {
                    usleep(UInt32(random.next() % 200))
                }
            }
        }
        #expect(Self.eventually { ledger.total.load(ordering: .acquiring) >= threads * perThread })
        for queue in queues {
            queue.sync(flags: .barrier) {}
        }
        usleep(50_000)
        progress("ever earlier: max lateness \(ledger.maxLate.load(ordering: .relaxed) / 1000) µs")
        #expect(ledger.never == 0, "bodies lost")
        #expect(ledger.twice == 0, "bodies run twice")
        #expect(ledger.early.load(ordering: .relaxed) == 0, "bodies run early")
        #expect(ledger.elsewhere.load(ordering: .relaxed) == 0, "bodies run off their queue")
    }

    /// Single bodies scheduled one after another with gaps, each the only one in the heap: the
    /// timer is re-armed from idle each time (the lost wake-up case).
    @Test func aLoneBodyAfterTheHeapEmptiedStillRuns() {
        let queue = DispatchQueue(label: "attack.lone")
        for round in 0..<200 {
            let ran = Deferred<Void>()
            let start = DispatchTime.now().uptimeNanoseconds
            let delay = Duration.microseconds(50 + (round % 7) * 300)
            queue.submit(after: delay) { ran.fill() }
            #expect(ran.wait(until: .now() + 10) != nil, "round \(round): body lost")
            #expect(DispatchTime.now().uptimeNanoseconds - start >= Self.nanos(delay))
        }
    }

    /// A short limit fires on time while the heap holds 100,000 withdrawn limits (25,000 under a
    /// sanitizer), and while another thread keeps adding and beating limits.
    @Test func aLimitFiresOnTimeWhileTheHeapIsFullOfWithdrawnLimits() {
        let queue = DispatchQueue.global()
        // A quarter under a sanitizer: still far more than the 1,024 at which the heap compacts.
        for index in 0..<TestSize.sanitized(100_000) {
            let writer = DeferredAttempt<Int, TestError>()
            let limited = writer.attempt.timeout(after: .seconds(3_600), upon: queue, failingWith: .timedOut)
            if index.isMultiple(of: 2) {
                writer.succeed(with: index)
            } else {
                limited.cancel()
            }
        }
        let stop = Atomic<Bool>(false)
        let churn = Thread {
            while !stop.load(ordering: .relaxed) {
                for _ in 0..<1_000 {
                    let writer = DeferredAttempt<Int, TestError>()
                    _ = writer.attempt.timeout(after: .seconds(3_600), upon: queue, failingWith: .timedOut)
                    writer.succeed(with: 0)
                }
            }
        }
        churn.start()
        defer { stop.store(true, ordering: .relaxed) }
        var worst: Duration = .zero
        for _ in 0..<50 {
            let writer = HeldWriter<Int, TestError>()
            let start = ContinuousClock.now
            let limited = writer.attempt.timeout(after: .milliseconds(20), upon: queue, failingWith: .timedOut)
            #expect(limited.wait(until: .now() + 10) == .failure(.timedOut))
            let elapsed = ContinuousClock.now - start
            #expect(elapsed >= .milliseconds(20), "fired early")
            worst = max(worst, elapsed)
        }
        progress("limit among withdrawn ones: worst \(worst)")
        // A limit held back by the withdrawn ones would wait for their hour; a loaded machine or
        // a sanitizer only delays it (0.68 s once under ThreadSanitizer in CI).
        #expect(worst < .seconds(10), "the limit fired \(worst) after it was set")
    }

    /// Huge delays (up to `Duration.seconds(Int64.max)`) neither fire early nor make the timer
    /// spin, and do not hold back a short one.
    @Test(arguments: [Int64(1) << 40, Int64(1) << 62, Int64.max - 1, Int64.max])
    func aHugeDelayNeitherFiresNorSpins(nanoseconds: Int64) {
        let queue = DispatchQueue(label: "attack.huge")
        let fired = Atomic<Bool>(false)
        queue.submit(after: .nanoseconds(nanoseconds)) { fired.store(true, ordering: .relaxed) }
        queue.submit(after: .seconds(Int64.max)) { fired.store(true, ordering: .relaxed) }
        let writer = HeldWriter<Int, TestError>()
        let limited = writer.attempt.timeout(after: .nanoseconds(nanoseconds), upon: queue, failingWith: .timedOut)
        let cpuBefore = Self.cpuTime()
        usleep(300_000)
        let cpu = Self.cpuTime() - cpuBefore
        let ran = Deferred<Void>()
        queue.submit(after: .milliseconds(5)) { ran.fill() }
        #expect(ran.wait(until: .now() + 10) != nil, "a short body behind a huge one")
        let didFire = fired.load(ordering: .relaxed)
        #expect(!didFire, "a huge delay fired")
        #expect(limited.peek() == nil, "a huge limit fired")
        progress("huge delay \(nanoseconds): \(cpu / 1_000_000) ms of CPU over 300 ms idle")
        blackHole(cpu)  // Judged in the exit test below, where no other test shares the process.
        limited.cancel()
    }

    #if EXIT_TESTS
        /// Huge delays pending on a queue cost no CPU while the process idles (measured in a
        /// child process of its own, so that no other test's CPU counts).
        @Test(.timeLimit(.minutes(2)))
        func hugeDelaysLeaveTheProcessIdle() async {
            let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
                let queue = DispatchQueue(label: "attack.huge.child")
                var limits: [Attempt<Int, TestError>] = []
                let writer = HeldWriter<Int, TestError>()
                for nanoseconds in [Int64(1) << 40, Int64(1) << 62, Int64.max - 1, Int64.max] {
                    queue.submit(after: .nanoseconds(nanoseconds)) {}
                    limits.append(
                        writer.attempt.timeout(after: .nanoseconds(nanoseconds), upon: queue, failingWith: .timedOut))
                }
                usleep(50_000)
                let before = DispatchTimersAttackTests.cpuTime()
                usleep(500_000)
                print("cpu: \((DispatchTimersAttackTests.cpuTime() - before) / 1_000_000)")
                print("fired: \(limits.filter { $0.peek() != nil }.count)")
                endExitTest(passed: true)
            }
            let report = String(decoding: result?.standardOutputContent ?? [], as: UTF8.self)
            progress("huge delays, idle child: \(report.split(separator: "\n").joined(separator: ", "))")
            #expect(measuredFigure("cpu", in: report).map { $0 < 100 } == true, "CPU while idle: \(report)")
            #expect(measuredFigure("fired", in: report) == 0)
        }
    #endif

    // MARK: Releases

    /// Once `cancel()` returns, nothing of a limited attempt's work or handlers is kept: the
    /// limit's timer (an hour away) holds none of it.
    @Test func cancellingALimitedAttemptReleasesItsCapturesAtOnce() {
        let live = LiveCount()
        let queue = DispatchQueue(label: "attack.release")
        for _ in 0..<1_000 {
            let tracked = LifetimeTracked(live)
            let limited = Attempt<Int, TestError> { writer in
                let held = HeldWriter(writer)
                held.onCancel { blackHole(tracked) }
            }
            .map(upon: .immediate) { value in
                blackHole(tracked)
                return value
            }
            .timeout(after: .seconds(3_600), upon: queue, failingWith: .timedOut)
            limited.upon(.immediate) { _ in blackHole(tracked) }
            limited.cancel()
        }
        #expect(live.value == 0, "\(live.value) captures kept after cancel")
    }

    /// The same for `delay` and for a retry waiting out its backoff, both on a queue.
    @Test func cancellingADelayOrABackoffOnAQueueReleasesItsCapturesAtOnce() {
        let live = LiveCount()
        let queue = DispatchQueue(label: "attack.delay")
        // Long enough that nothing comes due while the test cancels, short enough that every
        // timer has fired before the test ends: a timer left in the heap at exit would keep the
        // weak reference of a retry's backoff, which LeakSanitizer reports.
        let wait = Duration.seconds(2)
        for _ in 0..<500 {
            let tracked = LifetimeTracked(live)
            let delayed = Attempt<LifetimeTracked, TestError>(
                filledWith: .success(tracked), after: wait, upon: queue)
            delayed.cancel()
        }
        #expect(live.value == 0, "\(live.value) delayed values kept after cancel")
        for _ in 0..<200 {
            let tracked = LifetimeTracked(live)
            let started = Counter()
            let retried = Attempt<Int, TestError>.retry(attempts: 3, delay: wait, upon: queue) {
                blackHole(tracked)
                started.increment()
                return Attempt(failedWith: .failed(0))
            }
            #expect(started.value == 1)
            // The try failed at once; the loop decides on a retry on the queue (which calls
            // `shouldRetry` and so holds the plan meanwhile, like any body running when `cancel()`
            // is called). Once that has run, the loop waits out its backoff: the case tested.
            queue.sync {}
            retried.cancel()
        }
        #expect(live.value == 0, "\(live.value) retry captures kept after cancel")
        // The queue is serial and takes due bodies in deadline order: once this one has run,
        // every timer above has fired.
        let drained = Deferred<Void>()
        queue.submit(after: wait + .milliseconds(100)) { drained.fill() }
        #expect(drained.wait(until: .now() + .seconds(60)) != nil, "the timers fired")
    }

    /// A limit beaten by its source's success, or by a cancel, on other threads while it fires:
    /// one outcome, seen the same by every reader, and each handler runs once.
    @Test func limitsRacingSuccessAndCancelHaveOneOutcome() {
        let queue = DispatchQueue(label: "attack.race", attributes: .concurrent)
        final class Round: Sendable {
            let writer = HeldWriter<Int, TestError>()
            let limited = NSLocked<Attempt<Int, TestError>?>(nil)
            let handled = Counter()
            let seen = NSLocked<Result<Int, TestError>?>(nil)
            let micros: Int
            let cancels: Bool
            init(micros: Int, cancels: Bool) {
                self.micros = micros
                self.cancels = cancels
            }
            /// Sets the limit, just before the race.
            func arm(on queue: DispatchQueue) {
                let limited = writer.attempt.timeout(
                    after: .microseconds(micros), upon: queue, failingWith: .timedOut)
                limited.upon(.immediate) { [handled, seen] result in
                    handled.increment()
                    seen.withLock { $0 = result }
                }
                self.limited.withLock { $0 = limited }
            }
        }
        var outcomes: [String: Int] = [:]
        // 1,000 rounds at the quick size, 4,000 at full size, 500 under a sanitizer.
        for batch in 0..<max(1, min(8, TestSize.attack.raceRounds / 1_000)) {
            let rounds = (0..<500).map { Round(micros: 1 + ($0 * 7 + batch) % 60, cancels: $0 % 3 == 0) }
            RaceHarness.run(
                rounds,
                left: { round in
                    round.arm(on: queue)
                    RaceHarness.pause(Int(round.micros) * 20)
                    _ = round.writer.succeed(with: 1)
                },
                right: { round in
                    guard round.cancels else { return }
                    while round.limited.withLock({ $0 }) == nil {}
                    RaceHarness.pause(Int(round.micros) * 20)
                    round.limited.withLock { $0 }?.cancel()
                })
            for round in rounds {
                guard let limited = round.limited.withLock({ $0 }), let result = limited.wait(until: .now() + 10)
                else {
                    Issue.record("a round never finished")
                    continue
                }
                #expect(Self.eventually { round.handled.value >= 1 })
                #expect(round.handled.value == 1, "handler ran \(round.handled.value) times")
                #expect(round.seen.withLock { $0 } == result, "a reader saw another outcome")
                #expect(limited.peek() == result)
                outcomes["\(result)", default: 0] += 1
            }
        }
        usleep(300_000)
        progress("limit races: \(outcomes)")
        let allowed: Set = [
            "success(1)", "failure(TestSupport.TestError.timedOut)", "failure(TestSupport.TestError.cancelled)",
        ]
        #expect(Set(outcomes.keys).isSubset(of: allowed), "\(outcomes)")
        #expect(outcomes.count >= 2, "the race never mixed outcomes: \(outcomes)")
    }

    // MARK: Deep chains

    /// 100,000 chained limits on a queue, their source filled (or the tail cancelled) on a small
    /// stack: no recursion, every limit withdrawn.
    @Test(.skippedUnderThreadSanitizer, arguments: [false, true])
    func aHundredThousandChainedLimitsFinishOnASmallStack(cancelTail: Bool) {
        let depth = 100_000
        let queue = DispatchQueue(label: "attack.chain")
        let result = NSLocked<Result<Int, TestError>?>(nil)
        let writer = HeldWriter<Int, TestError>()
        var tail = writer.attempt
        for _ in 0..<depth {
            tail = tail.timeout(after: .seconds(3_600), upon: queue, failingWith: .timedOut)
        }
        let last = tail
        Self.onThreads(1, stackSize: 256 << 10) { _ in
            if cancelTail {
                last.cancel()
            } else {
                _ = writer.succeed(with: 7)
            }
            result.withLock { $0 = last.peek() }
        }
        #expect(result.withLock { $0 } == (cancelTail ? .failure(.cancelled) : .success(7)))
        // A short limit still fires on time after the heap took 100,000 withdrawn ones.
        let other = HeldWriter<Int, TestError>()
        let start = ContinuousClock.now
        #expect(
            other.attempt.timeout(after: .milliseconds(10), upon: queue, failingWith: .timedOut).wait(
                until: .now() + 10) == .failure(.timedOut))
        #expect(ContinuousClock.now - start < .seconds(1))
    }

    /// `allSucceeded` of 100,000 attempts, filled from the tail or cancelled, on a small stack;
    /// every value is released once.
    @Test(.skippedUnderThreadSanitizer, arguments: ["fill from tail", "cancel join", "fail first"])
    func allSucceededOfAHundredThousandOnASmallStack(mode: String) {
        let count = 100_000
        do {
            let writers = (0..<count).map { _ in HeldWriter<Tracked, TestError>() }
            let joined = writers.map(\.attempt).allSucceeded()
            let outcome = NSLocked<String>("")
            Self.onThreads(1, stackSize: 256 << 10) { _ in
                switch mode {
                case "fill from tail":
                    for index in stride(from: count - 1, through: 0, by: -1) {
                        _ = writers[index].succeed(with: Tracked(index))
                    }
                case "cancel join":
                    for index in stride(from: count - 1, through: count / 2, by: -1) {
                        _ = writers[index].succeed(with: Tracked(index))
                    }
                    joined.cancel()
                default:
                    for index in stride(from: count - 1, through: 1, by: -1) {
                        _ = writers[index].succeed(with: Tracked(index))
                    }
                    _ = writers[0].fail(with: .failed(0))
                }
                switch joined.peek() {
                case .success(let values):
                    outcome.withLock {
                        $0 = values.enumerated().allSatisfy { $0.offset == $0.element.value } ? "ordered" : "misordered"
                    }
                case .failure(let error): outcome.withLock { $0 = "\(error)" }
                case nil: outcome.withLock { $0 = "pending" }
                }
            }
            let expected = ["fill from tail": "ordered", "cancel join": "cancelled", "fail first": "failed(0)"][mode]
            #expect(outcome.withLock { $0 } == expected)
        }
        #expect(Self.released(), "values leaked")
        #expect(Tracked.minimum.load(ordering: .relaxed) >= 0, "values released twice")
    }

    // MARK: Joins

    /// Inputs that succeed on one thread while another fails one or cancels the join: one
    /// outcome, the handler once, and every value released exactly once.
    @Test func joinsWhoseInputsFailOrCancelWhileOthersSucceedReleaseEveryValueOnce() {
        let width = 8
        final class Round: Sendable {
            let writers: [HeldWriter<Tracked, TestError>]
            let joined: Attempt<[Tracked], TestError>
            let handled = Counter()
            let cancelJoin: Bool
            init(width: Int, cancelJoin: Bool) {
                writers = (0..<width).map { _ in HeldWriter<Tracked, TestError>() }
                joined = writers.map(\.attempt).allSucceeded()
                self.cancelJoin = cancelJoin
                joined.upon(.immediate) { [handled] _ in handled.increment() }
            }
        }
        var outcomes: [String: Int] = [:]
        // Batches of 500 rounds: 4,000 rounds at the quick size, 1,000 under a sanitizer.
        for batch in 0..<(TestSize.attack.raceRounds / 250) {
            do {
                let rounds = (0..<500).map { Round(width: width, cancelJoin: ($0 + batch).isMultiple(of: 2)) }
                RaceHarness.run(
                    rounds,
                    left: { round in
                        for index in 0..<(width - 1) {
                            _ = round.writers[index].succeed(with: Tracked(index))
                        }
                    },
                    right: { round in
                        if round.cancelJoin {
                            round.joined.cancel()
                        } else {
                            _ = round.writers[width - 1].fail(with: .failed(9))
                        }
                        _ = round.writers[width - 1].succeed(with: Tracked(width - 1))
                    })
                for round in rounds {
                    #expect(round.handled.value == 1)
                    outcomes[
                        "\(round.cancelJoin ? "cancel" : "fail"): \(round.joined.peek().map { "\($0)".prefix(20) } ?? "pending")",
                        default: 0] += 1
                }
            }
            #expect(Self.released(), "values leaked")
        }
        progress("join races: \(outcomes)")
        #expect(Tracked.minimum.load(ordering: .relaxed) >= 0, "values released twice")
    }

    struct Large: Equatable, Sendable {
        var a: String
        var b: [Int]
        var c: (Int, Int, Int, Int, Int, Int, Int, Int) = (1, 2, 3, 4, 5, 6, 7, 8)
        var d: SIMD8<Double> = .init(repeating: 1.5)
        var e: Tracked?
        static func == (l: Large, r: Large) -> Bool {
            l.a == r.a && l.b == r.b && l.c.7 == r.c.7 && l.d == r.d && l.e === r.e
        }
    }

    /// `allSucceeded` and `and` with strings, large structs, classes, `Void`, optionals and no
    /// inputs, filled in random order from two threads.
    @Test func allSucceededWithNonTrivialElementsKeepsOrderAndReleasesThem() throws {
        for round in 0..<200 {
            do {
                let count = 1 + round % 17
                let strings = (0..<count).map { _ in HeldWriter<String, TestError>() }
                let larges = (0..<count).map { _ in HeldWriter<Large, TestError>() }
                let voids = (0..<count).map { _ in HeldWriter<Void, TestError>() }
                let optionals = (0..<count).map { _ in HeldWriter<Tracked?, TestError>() }
                let joinedStrings = strings.map(\.attempt).allSucceeded()
                let joinedLarges = larges.map(\.attempt).allSucceeded()
                let joinedVoids = voids.map(\.attempt).allSucceeded()
                let joinedOptionals = optionals.map(\.attempt).allSucceeded()
                let both = strings[0].attempt.and(larges[0].attempt, voids[0].attempt, optionals[0].attempt)
                let order = (0..<count).shuffled()
                RaceHarness.run(
                    [0, 1],
                    left: { half in
                        for index in order where index % 2 == half {
                            _ = strings[index].succeed(with: String(repeating: "s\(index)", count: 20))
                            _ = voids[index].succeed(with: ())
                        }
                    },
                    right: { half in
                        for index in order where index % 2 == half {
                            _ = larges[index].succeed(with: Large(a: "L\(index)", b: [index], e: Tracked(index)))
                            _ = optionals[index].succeed(with: index.isMultiple(of: 3) ? nil : Tracked(index))
                        }
                    })
                #expect(
                    joinedStrings.peek().map { try? $0.get() }
                        == (0..<count).map { String(repeating: "s\($0)", count: 20) })
                #expect(try joinedLarges.peek()?.get().map(\.a) == (0..<count).map { "L\($0)" })
                #expect(
                    try joinedLarges.peek()?.get().allSatisfy { $0.d == .init(repeating: 1.5) && $0.c.7 == 8 } == true)
                #expect(try joinedVoids.peek()?.get().count == count)
                #expect(
                    try joinedOptionals.peek()?.get().map { $0?.value ?? -1 }
                        == (0..<count).map { $0.isMultiple(of: 3) ? -1 : $0 })
                #expect(try both.peek()?.get().1.a == "L0")
            }
            #expect(Self.released(), "round \(round): values leaked")
        }
        let empty: [Attempt<Tracked, TestError>] = []
        #expect(try empty.allSucceeded().peek()?.get().isEmpty == true)
        #expect(Tracked.minimum.load(ordering: .relaxed) >= 0)
    }

    /// The same attempt several times in one join, and a join that is dropped half filled.
    @Test func aRepeatedInputAndADroppedHalfFilledJoin() throws {
        do {
            let writer = HeldWriter<Tracked, TestError>()
            let joined = Array(repeating: writer.attempt, count: 5).allSucceeded()
            _ = writer.succeed(with: Tracked(1))
            #expect(try joined.peek()?.get().count == 5)
        }
        #expect(Self.released())
        do {
            let writers = (0..<10).map { _ in HeldWriter<Tracked, TestError>() }
            do {
                let joined = writers.map(\.attempt).allSucceeded()
                for index in 0..<5 {
                    _ = writers[index].succeed(with: Tracked(index))
                }
                blackHole(joined)
            }
            for index in 5..<10 {
                _ = writers[index].succeed(with: Tracked(index))
            }
        }
        #expect(Self.released(), "values leaked")
        let futures = (0..<10).map { _ in Deferred<Tracked>() }
        do {
            let joined = futures.allFilled()
            for (index, future) in futures.enumerated().reversed() {
                future.fill(with: Tracked(index))
            }
            #expect(joined.peek()?.map(\.value) == Array(0..<10))
        }
    }
}

/// A join's slots release values that arrive before or after it failed, or that a dropped
/// join holds.
@Suite(.serialized) struct JoinSlotReleaseTests {
    final class Tracked: Sendable {
        static let live = Atomic<Int>(0)
        init() { Self.live.wrappingAdd(1, ordering: .relaxed) }
        deinit { Self.live.wrappingSubtract(1, ordering: .relaxed) }
    }

    /// allSucceeded of two: the first fails, the second succeeds later; everything dropped.
    @Test func aValueArrivingAfterTheJoinFailedIsReleased() {
        do {
            let first = DeferredAttempt<Tracked, TestError>()
            let second = DeferredAttempt<Tracked, TestError>()
            let joined = [first.attempt, second.attempt].allSucceeded()
            _ = first.fail(with: .failed(1))
            _ = second.succeed(with: Tracked())
            #expect(joined.peek() == nil || true)
        }
        #expect(Tracked.live.load(ordering: .relaxed) == 0, "a value that arrived after the failure leaked")
    }

    /// allSucceeded of two: the second succeeds first, then the first fails.
    @Test func aValueArrivingBeforeTheJoinFailedIsReleased() {
        do {
            let first = DeferredAttempt<Tracked, TestError>()
            let second = DeferredAttempt<Tracked, TestError>()
            let joined = [first.attempt, second.attempt].allSucceeded()
            _ = second.succeed(with: Tracked())
            _ = first.fail(with: .failed(1))
            blackHole(joined)
        }
        #expect(Tracked.live.load(ordering: .relaxed) == 0, "a value stored before the failure leaked")
    }

    /// The same with `and`.
    @Test func andReleasesAValueStoredBeforeItFailed() {
        do {
            let first = DeferredAttempt<Tracked, TestError>()
            let second = DeferredAttempt<Tracked, TestError>()
            let joined = first.attempt.and(second.attempt)
            _ = second.succeed(with: Tracked())
            _ = first.fail(with: .failed(1))
            blackHole(joined)
        }
        #expect(Tracked.live.load(ordering: .relaxed) == 0)
    }

    /// allFilled of futures, dropped half filled.
    @Test func allFilledDroppedHalfFilledReleasesItsValues() {
        do {
            let futures = (0..<2).map { _ in Deferred<Tracked>() }
            let joined = futures.allFilled()
            futures[0].fill(with: Tracked())
            blackHole(joined)
        }
        #expect(Tracked.live.load(ordering: .relaxed) == 0)
    }
}

/// Diagnostics: how late bodies run, by load.
