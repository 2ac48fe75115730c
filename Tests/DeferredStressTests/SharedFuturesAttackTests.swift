import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

/// Adopted from a fresh-eye attack on "the key is forgotten (or the value kept) before any caller
/// can see the value" in `SharedFutures`, and on the same claim of `SharedAttempts`. Chains of
/// runs a million deep are `FutureKind.shared` and `AttemptKind.shared` in the stack-safety suites.
extension StressSuites {
    @Suite struct SharedFuturesAttackTests {
        /// A value object, so that a test sees when the table and its runs release it.
        final class Payload: Sendable {
            let id: Int
            let live: LiveCount
            let tracked: LifetimeTracked
            init(_ id: Int, _ live: LiveCount) {
                self.id = id
                self.live = live
                tracked = LifetimeTracked(live)
            }
        }

        /// One round of a race on key 0, whose first run waits for `root`.
        final class Round: Sendable {
            let shared: SharedFutures<Int, Int>
            let clock: VirtualTimeExecutor?
            let root = Deferred<Int>()
            let first: Future<Int>
            let starts = Counter()
            let outcome = NSLocked<String>("none")
            let later = NSLocked<Future<Int>?>(nil)

            init(keeping: Bool = false) {
                if keeping {
                    let clock = VirtualTimeExecutor()
                    self.clock = clock
                    shared = SharedFutures(keepingValuesFor: .seconds(1), upon: clock)
                } else {
                    clock = nil
                    shared = SharedFutures()
                }
                let root = root
                first = shared.future(for: 0) { _ in root }
            }

            /// Asks for key 0, whose new run's work never fills; returns whether `start` ran.
            func ask() -> (future: Future<Int>, started: Bool) {
                var started = false
                let future = shared.future(for: 0) { [starts] _ in
                    started = true
                    starts.increment()
                    return Deferred<Int>()
                }
                return (future, started)
            }
        }

        /// Asks for key 0 until the caller either starts a new run or sees the value through a
        /// future it joined; having seen it, the key must be gone (or kept) and the next ask must
        /// start a new run (or get the kept value).
        static func askUntilSeen(_ round: Round, keeping: Bool) {
            while true {
                let (future, started) = round.ask()
                if started {
                    round.outcome.withLock { $0 = "started a new run before seeing the value" }
                    return
                }
                // Watches the joined run for a while, so that the fill often lands meanwhile.
                var seen = future.peek()
                for _ in 0..<32 where seen == nil {
                    RaceHarness.pause(20)
                    seen = future.peek()
                }
                guard let value = seen else {
                    continue
                }
                let present = round.shared.contains(0)
                let (again, startedAgain) = round.ask()
                round.later.withLock { $0 = again }
                if keeping {
                    round.outcome.withLock {
                        $0 =
                            present && !startedAgain && again.peek() == value
                            ? "saw the value, then got it kept"
                            : "BAD: saw \(value), present \(present), started \(startedAgain), then \(String(describing: again.peek()))"
                    }
                } else {
                    round.outcome.withLock {
                        $0 =
                            !present && startedAgain && again.peek() == nil
                            ? "saw the value, then started a new run"
                            : "BAD: saw \(value), present \(present), started \(startedAgain), then \(String(describing: again.peek()))"
                    }
                }
                return
            }
        }

        // MARK: 1. Races of a fill on another thread against callers

        /// The work filling on one thread while the other keeps asking: whoever has seen the value
        /// through a joined future never finds the key again, and starts exactly one new run.
        @Test(.timeLimit(.minutes(3)))
        func fillAgainstACallerWhoAsksAgainOnceItHasSeenTheValue() {
            RaceHarness.expectInterleavings(
                "shared futures: fill vs ask after seeing",
                rounds: TestSize.attack.raceRounds,
                expected: ["saw the value, then started a new run", "started a new run before seeing the value"],
                setup: { Round() },
                left: { $0.root.fill(with: 7) },
                right: { Self.askUntilSeen($0, keeping: false) },
                classify: { round in
                    let outcome = round.outcome.withLock { $0 }
                    if round.starts.value != 1 {
                        Issue.record("\(round.starts.value) new runs started; exactly one expected")
                    }
                    if round.first.peek() != 7 {
                        Issue.record("the first caller got \(String(describing: round.first.peek()))")
                    }
                    if !round.shared.contains(0) || round.shared.count != 1 {
                        Issue.record("the new run is not the one in flight")
                    }
                    if outcome.hasPrefix("BAD") {
                        Issue.record("\(outcome)")
                    }
                    return outcome
                })
        }

        /// The same with values kept: a caller who has seen the value gets it kept, never a new run.
        @Test(.timeLimit(.minutes(3)))
        func fillAgainstACallerWhoAsksAgainWithValuesKept() {
            RaceHarness.expectInterleavings(
                "shared futures kept: fill vs ask after seeing",
                rounds: TestSize.attack.raceRounds,
                expected: ["saw the value, then got it kept"],
                setup: { Round(keeping: true) },
                left: { $0.root.fill(with: 7) },
                right: { Self.askUntilSeen($0, keeping: true) },
                classify: { round in
                    let outcome = round.outcome.withLock { $0 }
                    if outcome.hasPrefix("BAD") {
                        Issue.record("\(outcome)")
                    }
                    let expectedStarts = outcome == "saw the value, then got it kept" ? 0 : 1
                    if round.starts.value != expectedStarts {
                        Issue.record("\(round.starts.value) new runs for '\(outcome)'")
                    }
                    round.clock!.advance(by: .seconds(1))
                    if round.shared.count != expectedStarts {
                        Issue.record("\(round.shared.count) keys after the expiry")
                    }
                    return outcome
                })
        }

        /// `forget` and a new caller against the old run's fill: the old run's late report never
        /// removes the new run, and the new caller never gets the old value.
        @Test(.timeLimit(.minutes(3)))
        func forgetAndAskAgainstTheFill() {
            RaceHarness.expectInterleavings(
                "shared futures: forget+ask vs fill",
                rounds: TestSize.attack.raceRounds,
                expected: ["filled before forget", "forgot before the fill"],
                setup: { Round() },
                left: { $0.root.fill(with: 7) },
                right: { round in
                    let filledBefore = round.first.peek() != nil
                    round.shared.forget(0)
                    let (future, started) = round.ask()
                    round.later.withLock { $0 = future }
                    round.outcome.withLock {
                        $0 =
                            !started
                            ? "BAD: joined after forget"
                            : filledBefore ? "filled before forget" : "forgot before the fill"
                    }
                },
                classify: { round in
                    let outcome = round.outcome.withLock { $0 }
                    let later = round.later.withLock { $0 }!
                    if outcome.hasPrefix("BAD") { Issue.record("\(outcome)") }
                    if round.starts.value != 1 || later.peek() != nil {
                        Issue.record(
                            "the new caller: \(round.starts.value) starts, \(String(describing: later.peek()))")
                    }
                    if !round.shared.contains(0) || round.shared.count != 1 {
                        Issue.record("the old run's fill removed the new run")
                    }
                    if round.first.peek() != 7 { Issue.record("the first caller lost its value") }
                    return outcome == "filled before forget" ? outcome : "forgot before the fill"
                })
        }

        /// A kept value expiring against a caller asking: it gets the kept value or starts a new run.
        @Test(.timeLimit(.minutes(3)))
        func keptValueExpiringAgainstAsk() {
            RaceHarness.expectInterleavings(
                "shared futures: expiry vs ask",
                rounds: TestSize.attack.raceRounds,
                expected: ["got the kept value", "started a new run"],
                setup: { () -> Round in
                    let round = Round(keeping: true)
                    round.root.fill(with: 7)
                    return round
                },
                left: { $0.clock!.advance(by: .seconds(1)) },
                right: { round in
                    let (future, started) = round.ask()
                    round.later.withLock { $0 = future }
                    round.outcome.withLock { $0 = started ? "started a new run" : "got the kept value" }
                },
                classify: { round in
                    let outcome = round.outcome.withLock { $0 }
                    let later = round.later.withLock { $0 }!
                    if outcome == "got the kept value" {
                        if later.peek() != 7 || round.shared.count != 0 {
                            Issue.record("kept: \(String(describing: later.peek()))")
                        }
                    } else if later.peek() != nil || !round.shared.contains(0) {
                        Issue.record("the new run is not in flight")
                    }
                    return outcome
                })
        }

        /// Real time: values kept for a microsecond on a global queue, the work filled on another
        /// thread; the next ask gets the kept value or a new run's, never anything else.
        @Test(.timeLimit(.minutes(3)))
        func keptForAMicrosecondOnRealTime() {
            let shared = SharedFutures<Int, Int>(keepingValuesFor: .microseconds(1), upon: DispatchQueue.global())
            var counts: [String: Int] = [:]
            for round in 0..<TestSize.sanitized(2_000) {
                let value = shared.future(for: 0) { _ in Future(upon: .global()) { round } }.value(within: 10)
                let next = shared.future(for: 0) { _ in Future(filledWith: -1) }.value(within: 10)
                switch next {
                case value: counts["kept", default: 0] += 1
                case -1: counts["new run", default: 0] += 1
                default:
                    Issue.record("round \(round): saw \(String(describing: value)), then \(String(describing: next))")
                }
            }
            progress("shared futures, kept 1 µs: \(counts)")
            Thread.sleep(forTimeInterval: 0.05)
            #expect(shared.count == 0, "every kept value expired")
        }

        /// Four threads ask for eight keys, their work filling on other threads or at once; each
        /// run's value is unique, and a caller who has seen one value of a key and asks again never
        /// gets it again.
        @Test(.timeLimit(.minutes(3)))
        func stormOfCallersNeverSeeAValueTwice() {
            let shared = SharedFutures<Int, Int>()
            let ids = Counter()
            let repeats = Counter()
            let joins = Counter()
            let asks = Counter()
            DispatchQueue.concurrentPerform(iterations: 4) { thread in
                var random = SplitMix(seed: UInt64(thread + 1))
                for _ in 0..<TestSize.sanitized(2_000) {
                    let key = Int(random.next() % 8)
                    let now = random.next() % 2 == 0
                    func ask() -> Future<Int> {
                        asks.increment()
                        var started = false
                        let future = shared.future(for: key) { _ in
                            started = true
                            let id = ids.increment()
                            return now ? Future(filledWith: id) : Future(upon: .global()) { id }
                        }
                        if !started { joins.increment() }
                        return future
                    }
                    let seen = ask().value(within: 10)
                    let next = ask().value(within: 10)
                    if seen == nil || next == nil || seen == next {
                        repeats.increment()
                    }
                }
            }
            progress("shared futures storm: \(asks.value) asks, \(ids.value) runs, \(joins.value) joins")
            #expect(repeats.value == 0, "a caller saw the same run's value after asking again")
            #expect(joins.value > 0, "callers joined runs in flight")
            #expect(shared.count == 0)
        }

        // MARK: 2. Work filled when start returns, re-entrant starts

        @Test func workAlreadyFilledWhenStartReturnsIsForgottenOrKeptAtOnce() {
            let shared = SharedFutures<Int, Int>()
            let starts = Counter()
            for round in 0..<1_000 {
                let future = shared.future(for: round % 3) { key in
                    starts.increment()
                    return Future(filledWith: key).map(upon: .immediate) { $0 + round }
                }
                #expect(future.peek() == round % 3 + round)
                #expect(!shared.contains(round % 3))
            }
            #expect(starts.value == 1_000 && shared.count == 0)

            let clock = VirtualTimeExecutor()
            let kept = SharedFutures<Int, Int>(keepingValuesFor: .seconds(1), upon: clock)
            #expect(kept.future(for: 0) { _ in Future(filledWith: 1) }.peek() == 1)
            #expect(kept.contains(0))
            #expect(kept.future(for: 0) { _ in Future(filledWith: 2) }.peek() == 1, "kept")
            clock.advance(by: .seconds(1))
            #expect(kept.count == 0)
        }

        /// Inside `start`, asking for the same key joins the run being started; other keys start
        /// and finish; forgetting the key and asking again starts a newer run that the outer
        /// run's fill leaves alone.
        @Test func reentrantStart() {
            let shared = SharedFutures<Int, Int>()
            let inner = NSLocked<Future<Int>?>(nil)
            let newer = NSLocked<Future<Int>?>(nil)
            let newerWork = Deferred<Int>()
            let outer = Deferred<Int>()
            let future = shared.future(for: 0) { key in
                let joined = shared.future(for: key) { _ in
                    Issue.record("a nested start for a key in flight")
                    return Future(filledWith: -1)
                }
                inner.withLock { $0 = joined }
                #expect(joined.peek() == nil)
                #expect(shared.future(for: 1) { Future(filledWith: $0 * 10) }.peek() == 10)
                #expect(!shared.contains(1))
                shared.forget(key)
                newer.withLock { $0 = shared.future(for: key) { _ in newerWork } }
                return outer
            }
            outer.fill(with: 5)
            #expect(future.peek() == 5 && inner.withLock { $0 }?.peek() == 5)
            #expect(shared.contains(0), "the old run's fill left the newer run")
            newerWork.fill(with: 6)
            #expect(newer.withLock { $0 }?.peek() == 6 && shared.count == 0)
        }

        /// Handlers on the returned future, run on the filling thread, ask again for the key and
        /// for others: the key is gone, each ask starts one run.
        @Test func reentrantAskFromAnUponHandlerOnTheFillingThread() {
            let shared = SharedFutures<Int, Int>()
            let starts = Counter()
            for round in 0..<500 {
                let work = Deferred<Int>()
                let future = shared.future(for: 0) { _ in
                    starts.increment()
                    return work
                }
                let done = DispatchSemaphore(value: 0)
                let report = NSLocked<String?>(nil)
                let filler = NSLocked<ObjectIdentifier?>(nil)
                future.upon(.immediate) { value in
                    var problems: [String] = []
                    if shared.contains(0) { problems.append("key still there") }
                    if filler.withLock({ $0 }) != currentThreadID() { problems.append("not on the filling thread") }
                    let before = starts.value
                    let again = shared.future(for: 0) { _ in
                        starts.increment()
                        return Future(filledWith: value + 1)
                    }
                    let other = shared.future(for: 1) { _ in Future(filledWith: value + 2) }
                    if starts.value != before + 1 { problems.append("joined the filled run") }
                    if again.peek() != value + 1 || other.peek() != value + 2 { problems.append("wrong values") }
                    report.withLock { $0 = problems.joined(separator: ", ") }
                    done.signal()
                }
                Thread {
                    filler.withLock { $0 = currentThreadID() }
                    work.fill(with: round)
                }.start()
                #expect(done.wait(timeout: .now() + 10) == .success)
                let problems = report.withLock { $0 } ?? "no report"
                #expect(problems.isEmpty, "round \(round): \(problems)")
            }
            #expect(starts.value == 1_000 && shared.count == 0)
        }

        // MARK: 3. Callers who joined during start, work already filled

        /// Callers join while `start` runs on another thread, then `start` returns a filled work.
        ///
        /// A joiner that sees the value (by polling) and asks again must start a new run; the
        /// SharedFutures form.
        @Test(.timeLimit(.minutes(2)))
        func joinersDuringStartOfAFilledWorkNeverRejoinIt() {
            var violations: [String] = []
            let rounds = TestSize.sanitized(300)
            for round in 0..<rounds {
                let shared = SharedFutures<Int, Int>()
                let inStart = DispatchSemaphore(value: 0)
                let joined = DispatchSemaphore(value: 0)
                let finished = DispatchSemaphore(value: 0)
                Thread {
                    _ = shared.future(for: 0) { _ in
                        inStart.signal()
                        joined.wait()
                        return Future(filledWith: round)
                    }
                    finished.signal()
                }.start()
                inStart.wait()
                let spy = shared.future(for: 0) { _ in Future(filledWith: -1) }
                let padding = (0..<2_000).map { _ in shared.future(for: 0) { _ in Future(filledWith: -2) } }
                joined.signal()
                while spy.peek() == nil {}
                let present = shared.contains(0)
                var started = false
                let again = shared.future(for: 0) { _ in
                    started = true
                    return Future(filledWith: -3)
                }
                if present || !started {
                    violations.append(
                        "round \(round): present \(present), started \(started), got \(String(describing: again.peek()))"
                    )
                }
                finished.wait()
                withExtendedLifetime(padding) {}
            }
            #expect(violations.isEmpty, "\(violations.count) of \(rounds): \(violations.prefix(3))")
        }

        /// The same for `SharedAttempts`, whose documentation claims "a finished run is forgotten,
        /// failure or success, before any caller sees its result".
        @Test(.timeLimit(.minutes(2)))
        func sharedAttemptsJoinersDuringStartOfAFinishedWorkNeverRejoinIt() {
            var violations: [String] = []
            let rounds = TestSize.sanitized(300)
            for round in 0..<rounds {
                let shared = SharedAttempts<Int, Int, TestError>()
                let inStart = DispatchSemaphore(value: 0)
                let joined = DispatchSemaphore(value: 0)
                let finished = DispatchSemaphore(value: 0)
                Thread {
                    _ = shared.attempt(for: 0) { _ in
                        inStart.signal()
                        joined.wait()
                        return Attempt(succeededWith: round)
                    }
                    finished.signal()
                }.start()
                inStart.wait()
                let spy = shared.attempt(for: 0) { _ in Attempt(succeededWith: -1) }
                let padding = (0..<2_000).map { _ in shared.attempt(for: 0) { _ in Attempt(succeededWith: -2) } }
                joined.signal()
                while spy.peek() == nil {}
                let present = shared.contains(0)
                var started = false
                let again = shared.attempt(for: 0) { _ in
                    started = true
                    return Attempt(succeededWith: -3)
                }
                if present || !started {
                    violations.append(
                        "round \(round): present \(present), started \(started), got \(String(describing: again.peek()))"
                    )
                }
                finished.wait()
                withExtendedLifetime(padding) {}
            }
            progress(
                "shared attempts, joiners of a work finished at start: \(violations.count) of \(rounds) rounds saw the result before the key was forgotten"
            )
            #expect(violations.isEmpty, "\(violations.count) of \(rounds): \(violations.prefix(3))")
        }

        // MARK: 4. Deep chains

        /// Key n's work asks for key n-1, from inside `start`.
        @Test func shallowChainOfKeysFills() {
            let shared = SharedFutures<Int, Int>()
            let root = Deferred<Int>()
            var last = shared.future(for: 0) { _ in root }
            for key in 1..<500 {
                last = shared.future(for: key) { key in
                    shared.future(for: key - 1) { _ in
                        Issue.record("a nested start for a key in flight")
                        return Future(filledWith: -1)
                    }
                }
            }
            #expect(shared.count == 500)
            root.fill(with: 3)
            #expect(last.peek() == 3 && shared.count == 0)
        }

        // MARK: 5. The table dropped, leaks

        /// Dropping the table while its runs are in flight: every run still fills its callers, on
        /// other threads, and the table is gone.
        @Test func runsFillTheirCallersAfterTheTableIsDropped() {
            weak var weakTable: SharedFutures<Int, Int>?
            weak var weakKept: SharedFutures<Int, Int>?
            let works = (0..<200).map { _ in Deferred<Int>() }
            var futures: [Future<Int>] = []
            do {
                let shared = SharedFutures<Int, Int>()
                let kept = SharedFutures<Int, Int>(keepingValuesFor: .milliseconds(1), upon: DispatchQueue.global())
                weakTable = shared
                weakKept = kept
                for (index, work) in works.enumerated() {
                    futures.append(shared.future(for: index % 100) { _ in work })
                    futures.append(kept.future(for: index % 100) { _ in work })
                }
            }
            #expect(weakTable == nil && weakKept == nil, "the runs do not keep their table")
            DispatchQueue.concurrentPerform(iterations: works.count) { works[$0].fill(with: $0) }
            #expect(futures.allSatisfy { $0.value(within: 10) != nil })
            // Each key's callers got the value of the first work asked for it.
            for (index, future) in futures.enumerated() {
                #expect(future.peek() == (index / 2) % 100)
            }
        }

        /// Values, work captures and keys are released once the runs fill and the futures go,
        /// and kept values once they expire.
        @Test func nothingLeaks() {
            let live = LiveCount()
            let keys = Counter()
            let clock = VirtualTimeExecutor()
            weak var weakValue: Payload?
            do {
                let shared = SharedFutures<ObjectKey, Payload>()
                let kept = SharedFutures<ObjectKey, Payload>(keepingValuesFor: .seconds(1), upon: clock)
                for round in 0..<200 {
                    let key = ObjectKey(token: KeyToken(round % 7) { keys.increment() })
                    let captured = LifetimeTracked(live)
                    let work = Deferred<Payload>()
                    let a = shared.future(for: key) { _ in
                        work.map(upon: .immediate) { [captured] value in withExtendedLifetime(captured) { value } }
                    }
                    let b = kept.future(for: key) { _ in work }
                    let payload = Payload(round, live)
                    if round == 0 { weakValue = payload }
                    if round % 2 == 0 {
                        work.fill(with: payload)
                    } else {
                        DispatchQueue.global().async { work.fill(with: payload) }
                    }
                    #expect(a.value(within: 10)?.id == round && b.value(within: 10)?.id == round)
                    clock.advance(by: .seconds(1))
                }
                #expect(shared.count == 0 && kept.count == 0)
            }
            Thread.sleep(forTimeInterval: 0.1)  // the global queue's blocks return
            #expect(weakValue == nil)
            #expect(live.value == 0, "\(live.value) values or captures left")
            #expect(keys.value == 200, "\(200 - keys.value) keys left")
        }
    }
}
