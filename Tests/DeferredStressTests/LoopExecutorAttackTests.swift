import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

extension StressSuites {
    /// Fresh-eye attacks on `LoopExecutor` and `LoopGroup` through their public API: lost
    /// wake-ups, shutdown races, re-entrant shutdowns, thread leaks, delayed-body ordering and
    /// attempt graphs measured on a loop.
    @Suite struct LoopExecutorAttackTests {
        static var rounds: Int { max(200, TestSize.attack.threadRaceRounds) }

        /// A two-party spin gate for one round: the loop's own thread and the test thread leave it
        /// together, so that the loop finishes its last body at a random offset from the test's
        /// next step.
        final class Gate: Sendable {
            private let arrivals = Atomic<Int>(0)

            /// Leaves a gate with `loop`'s thread, which then finishes its last body while this
            /// thread goes on, each after a random pause.
            static func leave(with loop: LoopExecutor, using random: inout SplitMix) {
                let gate = Gate()
                let loopPause = Int(random.next() % 2_048)
                let testPause = Int(random.next() % 2_048)
                loop.submit {
                    gate.arrive()
                    RaceHarness.pause(loopPause)
                }
                gate.arrive()
                RaceHarness.pause(testPause)
            }

            func arrive() {
                arrivals.add(1, ordering: .acquiringAndReleasing)
                var spins = 0
                while arrivals.load(ordering: .acquiring) < 2 {
                    spins &+= 1
                    if spins & 0xFFFF == 0 { sched_yield() }
                }
            }
        }

        /// The number of threads of this process (Linux), or nil.
        static func threadCount() -> Int? {
            try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count
        }

        // MARK: Shutdown against the loop going idle

        /// A delayed body due at once, submitted just before `shutdown()`, is never stranded.
        ///
        /// It is submitted while the loop finishes its last body, and must run (it is due when
        /// the shutdown comes) or at least be released once the thread has exited. It must never
        /// be left in the loop's timer heap after the thread ends.
        @Test func aDueDelayedBodySubmittedAsTheLoopShutsDownIsNeverStranded() {
            var counts: [String: Int] = [:]
            var random = SplitMix(seed: TestSize.seed)
            for _ in 0..<Self.rounds * 5 {
                let loop = LoopExecutor(name: "strand")
                let live = LiveCount()
                let ran = Counter()
                Gate.leave(with: loop, using: &random)
                do {
                    let tracked = LifetimeTracked(live)
                    loop.submit(after: .zero) {
                        _ = tracked
                        ran.increment()
                    }
                }
                let exited = loop.shutdown().value(within: 30) != nil
                #expect(exited, "the thread exited")
                let outcome: String
                if ran.value == 1 {
                    outcome = "ran"
                } else if live.value == 0 {
                    outcome = "released"
                } else {
                    outcome = "stranded: neither run nor released after the thread exited"
                }
                counts[outcome, default: 0] += 1
                #expect(ran.value <= 1)
                withExtendedLifetime(loop) {}
            }
            progress("race due delayed body against loop shutdown: \(counts)")
            #expect(counts.keys.allSatisfy { !$0.hasPrefix("stranded") }, "\(counts)")
        }

        /// The stranding made likely, by a thread that keeps submitting zero-delay bodies.
        ///
        /// The bodies keep the loop waking, running them and looking again) while the test thread shuts the loop
        /// down, contending for the timer heap's lock between closing the stack and closing the
        /// heap. Every body must have run or been released once the thread has exited.
        @Test func aHammeredLoopShutDownStrandsNoDueBody() {
            final class Hammer: Sendable {
                let loop = LoopExecutor(name: "hammered")
                let live = LiveCount()
                let ran = Counter()
                let stop = Atomic<Bool>(false)
                let stopped = DispatchSemaphore(value: 0)
            }
            var counts: [String: Int] = [:]
            var worst = 0
            for _ in 0..<300 {
                let h = Hammer()
                Thread {
                    while !h.stop.load(ordering: .relaxed) {
                        let tracked = LifetimeTracked(h.live)
                        h.loop.submit(after: .zero) {
                            _ = tracked
                            h.ran.increment()
                        }
                    }
                    h.stopped.signal()
                }.start()
                usleep(UInt32.random(in: 50...500))
                let exited = h.loop.shutdown()
                usleep(100)
                h.stop.store(true, ordering: .relaxed)
                h.stopped.wait()
                #expect(exited.value(within: 30) != nil)
                // The thread has exited: nothing may run any more, everything left must be gone.
                let stranded = h.live.value
                worst = max(worst, stranded)
                counts[stranded == 0 ? "clean" : "stranded", default: 0] += 1
                withExtendedLifetime(h) {}
            }
            progress("hammered shutdown: \(counts), most stranded in a round: \(worst)")
            #expect(counts["stranded"] == nil, "\(counts); up to \(worst) due bodies neither ran nor were released")
        }

        /// What a stranded body costs: one that captures its loop (a retry's plan, a user's
        /// `loop.submit` in the body) makes a cycle loop -> thread -> timer heap -> body -> loop,
        /// so dropping every reference to the loop never frees it or the body.
        @Test func aStrandedBodyCapturingItsLoopLeaksForever() {
            let live = LiveCount()
            var strandedRounds = 0
            for _ in 0..<300 {
                let stop = Atomic<Bool>(false)
                let stopped = DispatchSemaphore(value: 0)
                let exited: Future<Void>
                do {
                    let loop = LoopExecutor(name: "cycle")
                    let box = Holder(loop)
                    Thread {
                        while !stop.load(ordering: .relaxed) {
                            let tracked = LifetimeTracked(live)
                            loop.submit(after: .zero) {
                                _ = tracked
                                _ = loop.isCurrent  // captures the loop
                            }
                        }
                        stopped.signal()
                    }.start()
                    usleep(UInt32.random(in: 50...500))
                    exited = box.loop!.shutdown()
                    box.loop = nil
                }
                usleep(100)
                stop.store(true, ordering: .relaxed)
                stopped.wait()
                _ = exited.value(within: 30)
                if !holds(within: 0.2, { live.value == 0 }) {
                    strandedRounds += 1
                    break
                }
            }
            #expect(live.value == 0, "\(live.value) bodies (and their loop) leaked in \(strandedRounds) round(s)")
        }

        /// What a stranded body means to a user: `delay(by: .zero, upon: loop)` attempts made while
        /// the loop shuts down must each finish or be orphaned; a stranded step leaves its attempt
        /// pending for as long as the loop object lives (a group's loops live for the process).
        @Test func hammeredZeroDelayAttemptsNeverStayPendingAfterShutdown() {
            final class Made: @unchecked Sendable {
                let lock = NSLock()
                var attempts: [Attempt<Int, any Error>] = []
            }
            var pendingRounds = 0
            var worst = 0
            for _ in 0..<300 {
                let loop = LoopExecutor(name: "attempt hammer")
                let made = Made()
                let stop = Atomic<Bool>(false)
                let stopped = DispatchSemaphore(value: 0)
                Thread {
                    while !stop.load(ordering: .relaxed) {
                        let a = Attempt<Int, any Error>(succeededWith: 1).delay(by: .zero, upon: loop)
                        made.lock.lock()
                        made.attempts.append(a)
                        made.lock.unlock()
                    }
                    stopped.signal()
                }.start()
                usleep(UInt32.random(in: 50...500))
                let exited = loop.shutdown()
                usleep(100)
                stop.store(true, ordering: .relaxed)
                stopped.wait()
                #expect(exited.value(within: 30) != nil)
                _ = holds(within: 0.5) { made.attempts.allSatisfy { $0.peek() != nil } }
                let pending = made.attempts.filter { $0.peek() == nil }.count
                if pending > 0 { pendingRounds += 1 }
                worst = max(worst, pending)
                withExtendedLifetime(loop) {}
            }
            #expect(
                pendingRounds == 0,
                "\(pendingRounds) rounds left up to \(worst) attempts pending after the loop's thread exited")
        }

        /// The loop's thread carries its name where Linux keeps it (`comm`, 15 bytes), also for a
        /// name whose 15th byte falls inside a character.
        @Test(arguments: ["plain-ascii-name-long", "éééééééééé"])
        func theThreadCarriesItsNameForTheSystem(_ name: String) {
            #if os(Linux)
                let loop = LoopExecutor(name: name)
                defer { loop.shutdown() }
                let read = Deferred<String?>()
                loop.submit {
                    read.fill(
                        with: (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8))?
                            .trimmingCharacters(in: .newlines))
                }
                let comm = read.value(within: 10) ?? nil
                #expect(comm.map { !$0.isEmpty && name.hasPrefix($0) } == true, "comm is \(comm ?? "nil")")
            #endif
        }

        /// The same through an attempt: `delay(by: .zero, upon: loop)` racing the loop's shutdown
        /// finishes, or is orphaned (its step released unrun); it never stays pending for good.
        @Test func aZeroDelayAttemptRacingShutdownFinishesOrIsOrphaned() {
            var counts: [String: Int] = [:]
            var random = SplitMix(seed: TestSize.seed)
            for _ in 0..<Self.rounds * 5 {
                let loop = LoopExecutor(name: "strand attempt")
                Gate.leave(with: loop, using: &random)
                let delayed = Attempt<Int, any Error>(succeededWith: 1).delay(by: .zero, upon: loop)
                let exited = loop.shutdown().value(within: 30) != nil
                #expect(exited)
                let decided = holds(within: 2) { delayed.peek() != nil }
                let outcome: String
                switch delayed.peek() {
                case .success?: outcome = "succeeded"
                case .failure?: outcome = "failed (orphaned)"
                case nil: outcome = "pending after the loop exited"
                }
                _ = decided
                counts[outcome, default: 0] += 1
                withExtendedLifetime(loop) {}
            }
            progress("race zero delay attempt against loop shutdown: \(counts)")
            #expect(counts["pending after the loop exited"] == nil, "\(counts)")
        }

        /// Once `isShutDown` is true, a delayed body is released at once without running ("a body
        /// submitted after shutdown is released at once").
        @Test(arguments: OwnedThreadKind.allCases)
        func aDelayedBodySubmittedOnceIsShutDownIsTrueNeverRuns(_ kind: OwnedThreadKind) {
            var counts: [String: Int] = [:]
            for _ in 0..<(Self.rounds / 100) {  // An executor thread a round: fewer rounds than above.
                let fixtures = (0..<100).map { _ in AfterShutdown(kind) }
                RaceHarness.run(
                    fixtures,
                    left: { f in
                        while !f.loop.isShutDown {}
                        do {
                            let tracked = LifetimeTracked(f.live)
                            f.loop.submit(after: .zero) {
                                _ = tracked
                                f.ran.increment()
                            }
                        }
                        f.liveRightAfter.store(f.live.value, ordering: .relaxed)
                    },
                    right: { f in f.loop.shutdown() }
                )
                for f in fixtures {
                    _ = f.loop.shutdown().value(within: 30)
                    let outcome =
                        f.ran.value == 1
                        ? "ran although submitted after isShutDown"
                        : (f.liveRightAfter.load(ordering: .relaxed) == 0
                            ? "released at once" : "kept after submit returned")
                    counts[outcome, default: 0] += 1
                }
            }
            progress("submit(after:) once isShutDown on \(kind): \(counts)")
            #expect(counts.keys.allSatisfy { $0 == "released at once" }, "\(counts)")
        }

        final class AfterShutdown: Sendable {
            let loop: any OwnedThreadExecutor
            init(_ kind: OwnedThreadKind) { loop = kind.make(name: "after") }
            let live = LiveCount()
            let ran = Counter()
            let liveRightAfter = Atomic<Int>(-1)
        }

        final class Slot: Sendable {
            let value = Atomic<Int>(-1)
        }

        final class Box<T>: @unchecked Sendable {
            let value: T
            init(_ value: T) { self.value = value }
        }

        /// Shutdown racing `submit(after:)` with delays around zero from another thread: every body
        /// runs exactly once or is released, and the thread exits.
        @Test func shutdownRacingDelayedSubmissionsRunsOrReleasesEveryBody() {
            final class Round: Sendable {
                let loop = LoopExecutor(name: "delayed race")
                let live = LiveCount()
                let ran = Counter()
            }
            var counts: [String: Int] = [:]
            for _ in 0..<(Self.rounds / 100) {
                let rounds = (0..<100).map { _ in Round() }
                RaceHarness.run(
                    rounds,
                    left: { round in
                        for delay in [Duration.zero, .nanoseconds(-1), .microseconds(5), .seconds(60)] {
                            let tracked = LifetimeTracked(round.live)
                            round.loop.submit(after: delay) {
                                _ = tracked
                                round.ran.increment()
                            }
                        }
                    },
                    right: { round in round.loop.shutdown() }
                )
                for round in rounds {
                    #expect(round.loop.shutdown().value(within: 30) != nil)
                    #expect(round.ran.value <= 3, "the 60 s body never runs")
                    let settled = holds(within: 1) { round.live.value == 0 }
                    #expect(settled, "every delayed body ran or was released: \(round.live.value) live")
                    counts["\(round.ran.value) ran", default: 0] += 1
                }
            }
            progress("shutdown against delayed submissions: \(counts)")
        }

        // MARK: Lost wake-ups

        /// Many threads submit plain and zero-delay bodies as the loop goes idle again and again:
        /// every body runs, once, on the loop, in each thread's submission order (plain bodies).
        @Test func manySubmittersNeverLoseAWakeUp() {
            let loop = LoopExecutor(name: "many")
            defer { loop.shutdown() }
            let threads = 4
            let perThread = TestSize.underSanitizer ? 2_000 : 20_000
            let seen = (0..<threads).map { _ in Slot() }
            let outOfOrder = Counter()
            let offLoop = Counter()
            let delayedRan = Counter()
            let group = DispatchGroup()
            for t in 0..<threads {
                group.enter()
                Thread {
                    for i in 0..<perThread {
                        loop.submit {
                            if !loop.isCurrent { offLoop.increment() }
                            if seen[t].value.exchange(i, ordering: .relaxed) != i - 1 { outOfOrder.increment() }
                        }
                        if i % 7 == 0 {
                            loop.submit(after: .zero) { delayedRan.increment() }
                        }
                        if i % 97 == 0 { usleep(UInt32.random(in: 0...50)) }
                    }
                    group.leave()
                }.start()
            }
            group.wait()
            let done = Deferred<Void>()
            loop.submit { done.fill() }
            #expect(done.value(within: 30) != nil)
            #expect(holds(within: 10) { delayedRan.value == threads * ((perThread + 6) / 7) })
            #expect(seen.allSatisfy { $0.value.load(ordering: .relaxed) == perThread - 1 })
            #expect(outOfOrder.value == 0)
            #expect(offLoop.value == 0)
        }

        /// While the loop sleeps for an hour-long body, two threads each submit a body due sooner
        /// at the same moment: both run promptly, never before their deadline.
        @Test func twoSoonerDelayedBodiesFromTwoThreadsBothWakeTheLoop() {
            let loop = LoopExecutor(name: "sooner race")
            defer { loop.shutdown() }
            loop.submit(after: .seconds(3600)) {}
            var late = 0
            var early = 0
            for _ in 0..<(Self.rounds / 100) {
                let fixtures = (0..<100).map { _ in
                    Box((left: Deferred<Duration>(), right: Deferred<Duration>()))
                }
                RaceHarness.run(
                    fixtures,
                    left: { box in
                        let start = ContinuousClock.now
                        loop.submit(after: .microseconds(200)) { box.value.left.fill(with: .now - start) }
                    },
                    right: { box in
                        let start = ContinuousClock.now
                        loop.submit(after: .microseconds(100)) { box.value.right.fill(with: .now - start) }
                    }
                )
                for f in fixtures {
                    for (d, minimum) in [
                        (f.value.left, Duration.microseconds(200)), (f.value.right, .microseconds(100)),
                    ] {
                        guard let elapsed = d.value(within: 30) else {
                            late += 1
                            continue
                        }
                        if elapsed < minimum { early += 1 }
                    }
                }
            }
            #expect(late == 0, "a sooner body waited for the hour-long one")
            #expect(early == 0, "a body ran before its deadline")
        }

        /// Ping-pong from inside bodies and delayed bodies: a body submits the next, a delayed body
        /// submits the next delayed body, alternately, a long chain; nothing is lost.
        @Test func chainsSubmittedFromInsideBodiesAndDelayedBodiesComplete() {
            let loop = LoopExecutor(name: "chain")
            defer { loop.shutdown() }
            let length = TestSize.underSanitizer ? 5_000 : 50_000
            let done = Deferred<Int>()
            let steps = Counter()
            @Sendable func step(_ i: Int) {
                steps.increment()
                guard loop.isCurrent else {
                    done.fill(with: -1)
                    return
                }
                if i == length {
                    done.fill(with: i)
                    return
                }
                switch i % 3 {
                case 0: loop.submit { step(i + 1) }
                case 1: loop.submit(after: .zero) { step(i + 1) }
                default: loop.submit(after: .nanoseconds(-5)) { step(i + 1) }
                }
            }
            loop.submit { step(0) }
            #expect(done.value(within: 60) == length, "\(steps.value) steps")
        }

        // MARK: Shutdown from the loop itself

        /// `shutdown()` called inside a body and inside a delayed body: bodies accepted before it
        /// still run, bodies submitted after it are released, delayed bodies not due are released
        /// at once, and the thread exits.
        @Test(arguments: [false, true])
        func shutdownFromInsideTheLoop(fromDelayedBody: Bool) {
            let loop = LoopExecutor(name: "inside")
            let live = LiveCount()
            let before = Counter()
            let after = Counter()
            let farRan = Counter()
            let gate = DispatchSemaphore(value: 0)
            let liveAfterShutdown = Atomic<Int>(-1)
            let isCurrentInside = Atomic<Bool>(false)
            do {
                let far = LifetimeTracked(live)
                loop.submit(after: .seconds(3600)) {
                    _ = far
                    farRan.increment()
                }
            }
            let shut: @Sendable () -> Void = {
                gate.wait()
                loop.shutdown()
                isCurrentInside.store(loop.isCurrent, ordering: .relaxed)
                // The far body was released by this very call.
                liveAfterShutdown.store(live.value, ordering: .relaxed)
                let tracked = LifetimeTracked(live)
                loop.submit {
                    _ = tracked
                    after.increment()
                }
                loop.submit(after: .zero) {
                    _ = tracked
                    after.increment()
                }
            }
            if fromDelayedBody {
                loop.submit(after: .zero, shut)
            } else {
                loop.submit(shut)
            }
            // Accepted before the shutdown (it waits on the gate).
            for _ in 0..<10 {
                let tracked = LifetimeTracked(live)
                loop.submit {
                    _ = tracked
                    before.increment()
                }
            }
            gate.signal()
            #expect(loop.shutdown().value(within: 30) != nil, "the thread exited")
            #expect(before.value == 10)
            #expect(after.value == 0)
            #expect(farRan.value == 0)
            let wasCurrent = isCurrentInside.load(ordering: .relaxed)
            #expect(wasCurrent)
            #expect(holds(within: 2) { live.value == 0 }, "\(live.value) live")
            #expect(!loop.isCurrent)
        }

        /// Captures whose deinitializers submit again (plain and delayed) and call `shutdown()`
        /// again while the shutdown releases them, on the loop and off it: no deadlock, nothing
        /// runs after the shutdown, nothing leaks.
        @Test(arguments: [false, true])
        func deinitializersThatSubmitDuringShutdown(fromLoop: Bool) {
            final class Resubmitter: Sendable {
                let loop: LoopExecutor
                let live: LiveCount
                let ran: Counter
                let tracked: LifetimeTracked
                let depth: Int
                init(_ loop: LoopExecutor, _ live: LiveCount, _ ran: Counter, depth: Int) {
                    self.loop = loop
                    self.live = live
                    self.ran = ran
                    self.depth = depth
                    tracked = LifetimeTracked(live)
                }
                deinit {
                    guard depth > 0 else { return }
                    let next = Resubmitter(loop, live, ran, depth: depth - 1)
                    let other = Resubmitter(loop, live, ran, depth: depth - 1)
                    let ran = ran
                    loop.submit {
                        _ = next
                        ran.increment()
                    }
                    loop.submit(after: .seconds(60)) {
                        _ = other
                        ran.increment()
                    }
                    loop.shutdown()
                }
            }
            let live = LiveCount()
            let ran = Counter()
            let exitedInTime: Bool
            do {
                let loop = LoopExecutor(name: "deinit submits")
                for _ in 0..<20 {
                    let r = Resubmitter(loop, live, ran, depth: 4)
                    loop.submit(after: .seconds(60)) {
                        _ = r
                        ran.increment()
                    }
                }
                if fromLoop {
                    loop.submit { loop.shutdown() }
                } else {
                    loop.shutdown()
                }
                exitedInTime = loop.shutdown().value(within: 30) != nil
            }
            #expect(exitedInTime)
            #expect(ran.value == 0, "nothing submitted after the shutdown ran")
            #expect(holds(within: 5) { live.value == 0 }, "\(live.value) live")
        }

        /// The executor released from inside one of its own bodies (its last reference lives in the
        /// body) shuts down: the thread exits and the remaining delayed bodies are released.
        @Test func aLoopReleasedInsideItsOwnBodyShutsDown() {
            let live = LiveCount()
            let exited = Deferred<Void>()
            let before = threadCountAfterSettling()
            do {
                var loop: LoopExecutor? = LoopExecutor(name: "self release")
                let tracked = LifetimeTracked(live)
                loop!.submit(after: .seconds(3600)) { _ = tracked }
                loop!.shutdown().upon(.immediate) { exited.fill() }
                // Only the body holds the loop now; it lets go of it on the loop's own thread.
                let holder = Holder(loop.take()!)
                holder.loop!.submit {
                    holder.loop = nil
                }
            }
            #expect(exited.value(within: 30) != nil, "releasing the loop shut it down")
            #expect(holds(within: 10) { live.value == 0 })
            if let before {
                #expect(holds(within: 10) { (Self.threadCount() ?? 0) <= before }, "the thread is gone")
            }
        }

        final class Holder: @unchecked Sendable {
            var loop: LoopExecutor?
            init(_ loop: LoopExecutor) { self.loop = loop }
        }

        func threadCountAfterSettling() -> Int? {
            Thread.sleep(forTimeInterval: 0.05)
            return Self.threadCount()
        }

        // MARK: Thread leaks

        /// Many groups created and shut down, or just dropped: no thread is left.
        @Test(arguments: [false, true])
        func manyGroupsLeaveNoThreads(dropOnly: Bool) {
            guard let before = Self.threadCount() else { return }
            for i in 0..<50 {
                let group = LoopGroup(loops: 4, name: "leak \(i)")
                let done = Deferred<Void>()
                group.next().submit(after: .seconds(3600)) { done.fill() }
                group.next().submit { _ = group.next() }
                if !dropOnly {
                    #expect(group.shutdown().value(within: 30) != nil)
                }
            }
            let settled = holds(within: 10) { (Self.threadCount() ?? 0) <= before }
            #expect(settled, "threads before \(before), after \(Self.threadCount() ?? -1)")
        }

        // MARK: Delayed bodies: order, extremes

        /// Delayed bodies taken together run by deadline, then submission: zero and negative
        /// delays included, and equal delays in submission order.
        @Test func delayedBodiesRunByDeadlineThenSubmission() {
            let loop = LoopExecutor(name: "order")
            defer { loop.shutdown() }
            let block = holdThread(of: loop)
            let order = Mutex<[Int]>([])
            // i in 0..<200: delays -i ms: later ones are due earlier.
            for i in 0..<200 {
                loop.submit(after: .milliseconds(-i)) { order.withLock { $0.append(i) } }
            }
            // Then equal far-past delays: each a later deadline than the one before (same delay,
            // later clock), so submission order.
            for i in 200..<300 {
                loop.submit(after: .seconds(-1000)) { order.withLock { $0.append(i) } }
            }
            block.signal()
            let done = Deferred<Void>()
            loop.submit(after: .milliseconds(1)) { done.fill() }
            #expect(done.value(within: 30) != nil)
            let seen = order.withLock { $0 }
            #expect(seen == Array(200..<300) + Array((0..<200).reversed()))
        }

        /// Extreme delays: a body a billion seconds away (and further) does not keep the loop
        /// from running others, never runs, and is released at shutdown.
        @Test func veryLongDelaysNeitherRunNorBlock() {
            let loop = LoopExecutor(name: "far")
            let live = LiveCount()
            let farRan = Counter()
            for delay in [
                Duration.seconds(1e9), .seconds(999_999_999), .seconds(1_000_000_001), .seconds(Int64.max / 4),
            ] {
                let tracked = LifetimeTracked(live)
                loop.submit(after: delay) {
                    _ = tracked
                    farRan.increment()
                }
            }
            for _ in 0..<3 {
                let ran = Deferred<Void>()
                loop.submit(after: .milliseconds(5)) { ran.fill() }
                #expect(ran.value(within: 10) != nil, "a near body still runs")
                let plain = Deferred<Void>()
                loop.submit { plain.fill() }
                #expect(plain.value(within: 10) != nil)
            }
            #expect(live.value == 4)
            #expect(loop.shutdown().value(within: 10) != nil)
            #expect(farRan.value == 0)
            #expect(live.value == 0, "far bodies released by the shutdown")
        }

        /// `isCurrent` on the loop in plain and delayed bodies and in callbacks, false elsewhere,
        /// and false on every thread after exit.
        @Test func isCurrentOnlyOnTheLoop() {
            let group = LoopGroup(loops: 2, name: "current")
            let a = group.loops[0]
            let b = group.loops[1]
            let seen = Deferred<[Bool]>()
            a.submit {
                let inPlain = a.isCurrent && !b.isCurrent
                a.submit(after: .zero) {
                    seen.fill(with: [inPlain, a.isCurrent, !b.isCurrent])
                }
            }
            #expect(seen.value(within: 10) == [true, true, true])
            #expect(!a.isCurrent && !b.isCurrent)
            _ = group.shutdown().value(within: 10)
            let after = Deferred<Bool>()
            // Threads started later may get the loop's old identifier.
            for _ in 0..<20 {
                let d = Deferred<Bool>()
                Thread { d.fill(with: a.isCurrent || b.isCurrent) }.start()
                if d.value(within: 10) == true { after.fill(with: true) }
            }
            #expect(after.peek() == nil)
        }

        // MARK: Attempt graphs on a loop

        /// A chain of timeouts thousands deep measured on one loop: with a success, every level
        /// succeeds; with a source that never finishes, the level with the shortest limit times out
        /// and everything after it fails.
        @Test(arguments: [false, true])
        func timeoutChainsThousandsDeep(succeed: Bool) async {
            let loop = LoopExecutor(name: "timeout chain")
            defer { loop.shutdown() }
            let depth = TestSize.underSanitizer ? 2_000 : 10_000
            let writer = DeferredAttempt<Int, any Error>()
            let result = await onDeepStack("loop timeout chain") { () -> String in
                var attempt = writer.attempt
                for i in 0..<depth {
                    let limit: Duration = succeed ? .seconds(60) : .milliseconds(50 + i % 50)
                    attempt = attempt.timeout(after: limit, upon: loop)
                }
                let done = Deferred<Result<Int, any Error>>()
                attempt.upon(loop) { done.fill(with: $0) }
                if succeed { writer.succeed(with: 7) }
                switch done.value(within: 60) {
                case nil: return "no result"
                case .success(let v)?: return "success \(v)"
                case .failure(let e)?: return e is TimeoutError ? "timeout" : "other failure"
                }
            }
            #expect(result == (succeed ? "success 7" : "timeout"))
            if !succeed {
                #expect(writer.attempt.isCancelled)
            }
        }

        /// A timeout of zero or a few microseconds on a loop racing the source's success: the
        /// consumer sees exactly one result, on the loop.
        @Test func limitsRacingSuccesses() {
            final class Round: Sendable {
                let writer = DeferredAttempt<Int, any Error>()
                let runs = Counter()
                let result = Atomic<Int>(0)  // 1 success, 2 timeout, 3 other, 4 off the loop
            }
            let loop = LoopExecutor(name: "limit race")
            defer { loop.shutdown() }
            var counts: [String: Int] = [:]
            for _ in 0..<(Self.rounds * 5 / 100) {
                let rounds = (0..<100).map { _ in Round() }
                RaceHarness.run(
                    rounds,
                    left: { round in
                        round.writer.attempt.timeout(after: .microseconds(Int.random(in: 0...20)), upon: loop)
                            .upon(loop) { result in
                                let code: Int
                                switch result {
                                case .success: code = 1
                                case .failure(let e): code = e is TimeoutError ? 2 : 3
                                }
                                // The result first: the test reads it once it sees the run counted.
                                round.result.store(loop.isCurrent ? code : 4, ordering: .releasing)
                                round.runs.increment()
                            }
                    },
                    right: { round in _ = round.writer.succeed(with: 1) }
                )
                for round in rounds {
                    let decided = holds(within: 10) { round.runs.value > 0 }
                    #expect(decided)
                    #expect(round.runs.value == 1)
                    let code = round.result.load(ordering: .acquiring)
                    counts[code == 1 ? "succeeded" : code == 2 ? "timed out" : "bad \(code)", default: 0] += 1
                }
            }
            progress("loop limits against successes: \(counts)")
            #expect(counts.keys.allSatisfy { $0 == "succeeded" || $0 == "timed out" }, "\(counts)")
        }

        /// `delay(by:upon: loop)` chains and `retry` with exponential backoff on a loop: retries start
        /// on the loop, waits are honoured, the result comes.
        @Test func delayChainsAndRetriesOnALoop() {
            let loop = LoopExecutor(name: "retry")
            defer { loop.shutdown() }
            var attempt = Attempt<Int, any Error>(succeededWith: 0)
            for _ in 0..<1_000 {
                attempt = attempt.delay(by: .microseconds(1), upon: loop).map(upon: loop) { $0 + 1 }
            }
            #expect(attempt.wait(until: .now() + 30).map { try? $0.get() } == 1_000)

            let starts = Counter()
            let offLoop = Counter()
            let started = ContinuousClock.now
            let retried = Attempt<Int, any Error>.retry(
                attempts: 6, delay: .milliseconds(2), upon: loop, backoff: .exponential(multiplier: 2)
            ) {
                let n = starts.increment()
                if n > 0 && !loop.isCurrent { offLoop.increment() }
                return n < 5 ? Attempt(failedWith: TestError.failed(1)) : Attempt(succeededWith: n)
            }
            let value = retried.wait(until: .now() + 30).map { try? $0.get() }
            let elapsed = ContinuousClock.now - started
            #expect(value == 5)
            #expect(starts.value == 6)
            #expect(offLoop.value == 0, "retries start on the loop")
            #expect(elapsed >= .milliseconds(2 + 4 + 8 + 16 + 32), "\(elapsed)")
        }

        /// A retry waiting out its backoff on a loop that shuts down: its step is released unrun,
        /// so the retry is orphaned (fails), never left pending.
        @Test func aRetryWaitingOnALoopThatShutsDownIsOrphaned() {
            let loop = LoopExecutor(name: "retry shutdown")
            let retried = Attempt<Int, any Error>.retry(attempts: 3, delay: .seconds(60), upon: loop) {
                Attempt(failedWith: TestError.failed(1))
            }
            Thread.sleep(forTimeInterval: 0.01)
            #expect(loop.shutdown().value(within: 10) != nil)
            let decided = holds(within: 5) { retried.peek() != nil }
            #expect(decided, "the retry did not stay pending")
        }
    }
}
