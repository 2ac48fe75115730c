import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

/// A future written outside the library that reads through to any future: the table can take
/// neither the storage path nor the view path for it, only `peek` and `upon`.
private struct ForwardingFuture<Base: FutureProtocol>: FutureProtocol {
    typealias Value = Base.Value
    let base: Base
    let handlers = Counter()

    func upon(_ executor: some Executor, execute body: @escaping @Sendable (Value) -> Void) {
        handlers.increment()
        base.upon(executor, execute: body)
    }

    func peek() -> Value? { base.peek() }
}

/// Adopted from a fresh-eye attack on re-entrancy into the shared tables: a work finished (or
/// cancelled) when `start` returns, `start` and callers' handlers asking the table again, and
/// chains of runs over views, user-written futures and dropped tables.
extension StressSuites {
    @Suite struct SharedTablesReentrancyAttackTests {

        // MARK: SharedAttempts, work finished when start returns

        /// Every kind of finished work: the caller and a caller who joined inside `start` get the
        /// result, the joiner's handler runs only after the key is forgotten, and asking again
        /// from that handler starts a new run.
        @Test func finishedWorkOfEveryKindIsForgottenBeforeAnyCallerSeesIt() {
            enum Kind: CaseIterable { case success, failure, cancellationValue, cancelledWriter, cancelledMap }
            for kind in Kind.allCases {
                let shared = SharedAttempts<Int, Int, TestError>()
                let starts = Counter()
                let seen = NSLocked<[String]>([])
                let again = NSLocked<Attempt<Int, TestError>?>(nil)
                let caller = shared.attempt(for: 0) { key in
                    starts.increment()
                    let joiner = shared.attempt(for: key) { _ in
                        Issue.record("nested start for a key in flight")
                        return Attempt(succeededWith: -1)
                    }
                    joiner.upon(.immediate) { result in
                        let contained = shared.contains(key)
                        let before = starts.value
                        let next = shared.attempt(for: key) { _ in
                            starts.increment()
                            return Attempt(succeededWith: 99)
                        }
                        again.withLock { $0 = next }
                        seen.withLock {
                            $0.append("contains \(contained), restarted \(starts.value == before + 1), \(result)")
                        }
                    }
                    switch kind {
                    case .success: return Attempt(succeededWith: 1)
                    case .failure: return Attempt(failedWith: .failed(2))
                    case .cancellationValue: return Attempt(failedWith: .cancelled)
                    case .cancelledWriter:
                        let writer = HeldWriter<Int, TestError>()
                        writer.attempt.cancel()
                        return writer.attempt
                    case .cancelledMap:
                        let writer = HeldWriter<Int, TestError>()
                        let mapped = writer.attempt.map(upon: .immediate) { $0 + 1 }
                        writer.attempt.cancel()
                        return mapped
                    }
                }
                let expected: Result<Int, TestError> =
                    switch kind {
                    case .success: .success(1)
                    case .failure: .failure(.failed(2))
                    case .cancellationValue, .cancelledWriter, .cancelledMap: .failure(.cancelled)
                    }
                #expect(caller.peek() == expected, "\(kind)")
                let lines = seen.withLock { $0 }
                #expect(lines == ["contains false, restarted true, \(expected)"], "\(kind): \(lines)")
                #expect(again.withLock { $0 }?.peek() == .success(99), "\(kind)")
                #expect(starts.value == 2 && shared.count == 0, "\(kind): starts \(starts.value)")
            }
        }

        /// The same with retention on a virtual clock: a success (and a failure, when asked) is
        /// kept and handed to the joiner's re-ask without a start; a cancellation never is.
        @Test func finishedWorkWithRetention() {
            let clock = VirtualTimeExecutor()
            let shared = SharedAttempts<Int, Int, TestError>(
                keepingSuccessesFor: .seconds(5), failuresFor: .seconds(2), upon: clock)
            let cases: [(Int, @Sendable () -> Attempt<Int, TestError>, Result<Int, TestError>, Bool)] = [
                (0, { Attempt(succeededWith: 10) }, .success(10), true),
                (1, { Attempt(failedWith: .failed(11)) }, .failure(.failed(11)), true),
                (2, { Attempt(failedWith: .cancelled) }, .failure(.cancelled), false),
                (
                    3,
                    {
                        let w = HeldWriter<Int, TestError>()
                        w.attempt.cancel()
                        return w.attempt
                    }, .failure(.cancelled), false
                ),
            ]
            for (key, work, expected, kept) in cases {
                let starts = Counter()
                let reasked = NSLocked<Attempt<Int, TestError>?>(nil)
                let caller = shared.attempt(for: key) { key in
                    starts.increment()
                    shared.attempt(for: key) { _ in Attempt(succeededWith: -1) }.upon(.immediate) { _ in
                        reasked.withLock {
                            $0 = shared.attempt(for: key) { _ in
                                starts.increment()
                                return Attempt(succeededWith: -2)
                            }
                        }
                    }
                    return work()
                }
                #expect(caller.peek() == expected, "key \(key)")
                // Not kept: the joiner's re-ask started a new run, whose success is kept instead.
                #expect(shared.contains(key), "key \(key)")
                let r = reasked.withLock { $0 }?.peek()
                #expect(r == (kept ? expected : .success(-2)), "key \(key): reask got \(String(describing: r))")
                #expect(starts.value == (kept ? 1 : 2), "key \(key)")
            }
            clock.advance(by: .seconds(2))
            #expect(shared.contains(0) && !shared.contains(1))
            clock.advance(by: .seconds(3))
            #expect(shared.count == 0)
        }

        /// A joiner made and cancelled inside `start` neither cancels the run nor gets its result;
        /// the run is cancelled only when the caller who started it gives up too.
        @Test func joinerCancelledInsideStart() {
            // Finished work.
            let shared = SharedAttempts<Int, Int, TestError>()
            let delivered = Counter()
            let caller = shared.attempt(for: 0) { key in
                let joiner = shared.attempt(for: key) { _ in Attempt(succeededWith: -1) }
                joiner.uponSuccess(.immediate) { _ in delivered.increment() }
                joiner.cancel()
                #expect(joiner.peek() == .failure(.cancelled))
                return Attempt(succeededWith: 1)
            }
            #expect(caller.peek() == .success(1) && delivered.value == 0 && shared.count == 0)

            // Pending work.
            let work = AttackWork<TestError>()
            let pending = shared.attempt(for: 1) { key in
                let joiner = shared.attempt(for: key, start: work.start)
                joiner.cancel()
                return work.start(key)
            }
            #expect(work.starts == 1 && work.run(0).stops.value == 0, "a joiner's cancel stopped the run")
            #expect(shared.contains(1))
            pending.cancel()
            #expect(work.run(0).stops.value == 1 && !shared.contains(1))
            let next = shared.attempt(for: 1, start: work.start)
            #expect(work.starts == 2 && next.peek() == nil)
            work.run(1).writer.succeed(with: 5)
            #expect(next.peek() == .success(5) && shared.count == 0)
        }

        /// The work's own cancel handler, run re-entrantly inside `start` as `start` cancels its
        /// producer, asks the table for the same key and for another: no deadlock, nothing left
        /// parked, every attempt decided and the table empty.
        @Test(.timeLimit(.minutes(1)))
        func producerCancelledInsideStartWhoseCancelHandlerAsksAgain() {
            let shared = SharedAttempts<Int, Int, TestError>()
            let inner = NSLocked<[Attempt<Int, TestError>]>([])
            let handlerRan = Counter()
            let caller = shared.attempt(for: 0) { key in
                let writer = HeldWriter<Int, TestError>()
                writer.onCancel {
                    handlerRan.increment()
                    let same = shared.attempt(for: key) { _ in Attempt(succeededWith: 7) }
                    let other = shared.attempt(for: key + 1) { _ in Attempt(succeededWith: 8) }
                    inner.withLock { $0 += [same, other] }
                }
                writer.attempt.cancel()
                return writer.attempt
            }
            #expect(caller.peek() == .failure(.cancelled))
            #expect(handlerRan.value == 1)
            let attempts = inner.withLock { $0 }
            // `same` joined the run being started (the key still led to it): it gets the work's
            // own cancellation, like every caller of that run.
            progress("producer cancelled in start; same key got \(String(describing: attempts.first?.peek()))")
            #expect(attempts.count == 2 && attempts.allSatisfy { $0.peek() != nil })
            #expect(attempts.last?.peek() == .success(8))
            #expect(shared.count == 0)
        }

        /// `start` forgets its key and asks for it again, getting a finished or a pending newer
        /// run, then returns finished work: the outer run's end leaves the newer run alone.
        @Test func startRestartsItsOwnKeyThenFinishes() {
            let shared = SharedAttempts<Int, Int, TestError>()
            let newer = NSLocked<Attempt<Int, TestError>?>(nil)
            let a = shared.attempt(for: 0) { key in
                shared.forget(key)
                newer.withLock { $0 = shared.attempt(for: key) { _ in Attempt(succeededWith: 2) } }
                return Attempt(succeededWith: 1)
            }
            #expect(a.peek() == .success(1) && newer.withLock { $0 }?.peek() == .success(2) && shared.count == 0)

            let writer = HeldWriter<Int, TestError>()
            let b = shared.attempt(for: 1) { key in
                shared.forget(key)
                newer.withLock { $0 = shared.attempt(for: key) { _ in writer.attempt } }
                return Attempt(succeededWith: 1)
            }
            #expect(b.peek() == .success(1))
            #expect(shared.contains(1), "the old run's end removed the newer run")
            let joined = shared.attempt(for: 1) { _ in Attempt(succeededWith: -1) }
            writer.succeed(with: 3)
            #expect(joined.peek() == .success(3) && newer.withLock { $0 }?.peek() == .success(3))
            #expect(shared.count == 0)
        }

        /// Nested starts, each of whose work is the next key's caller, finished at the bottom:
        /// every level decides through the parked path, in order, with its key forgotten first.
        @Test func nestedStartsOfFinishedWorkUnwindInOrder() {
            let shared = SharedAttempts<Int, Int, TestError>()
            let depth = 100
            let order = NSLocked<[Int]>([])
            let violations = Counter()
            @Sendable func ask(_ key: Int) -> Attempt<Int, TestError> {
                shared.attempt(for: key) { key in
                    let inner = key == depth ? Attempt(succeededWith: 0) : ask(key + 1)
                    // A joiner of this key, made now: its handler runs only once this run ended.
                    shared.attempt(for: key) { _ in Attempt(succeededWith: -1) }.upon(.immediate) { _ in
                        if shared.contains(key) { violations.increment() }
                        order.withLock { $0.append(key) }
                    }
                    return inner.map(upon: .immediate) { $0 + 1 }
                }
            }
            let top = ask(0)
            #expect(top.peek() == .success(depth + 1))
            #expect(violations.value == 0)
            #expect(order.withLock { $0 } == Array((0...depth).reversed()))
            #expect(shared.count == 0)
        }

        /// Thousands of callers who joined inside `start`, each of whose handlers asks for the same
        /// key while the parked run delivers: each ask starts one new run; none joins the finished one.
        @Test(.timeLimit(.minutes(1)))
        func manyJoinersReaskDuringParkedDelivery() {
            let shared = SharedAttempts<Int, Int, TestError>()
            let count = 5_000
            let starts = Counter()
            let results = NSLocked<[Result<Int, TestError>]>([])
            let caller = shared.attempt(for: 0) { key in
                starts.increment()
                for _ in 0..<count {
                    shared.attempt(for: key) { _ in Attempt(succeededWith: -1) }.uponSuccess(.immediate) { _ in
                        let again = shared.attempt(for: key) { _ in Attempt(succeededWith: starts.increment() + 1) }
                        results.withLock { $0.append(again.peek()!) }
                    }
                }
                return Attempt(succeededWith: 0)
            }
            #expect(caller.peek() == .success(0))
            let values = results.withLock { $0 }
            #expect(values.count == count)
            #expect(Set(values.compactMap(\.successValue)).count == count, "a re-ask joined a finished run")
            #expect(starts.value == count + 1 && shared.count == 0)
        }

        // MARK: SharedAttempts, deep

        /// A chain of pending runs 20,000 deep whose root is finished inside the `start` of one more
        /// key, which returns the (now finished) joiner of the chain's tail: the cascade and the
        /// parked decision both finish in constant stack, every key forgotten, captures released.
        @Test(.timeLimit(.minutes(2)), .skippedUnderThreadSanitizer)
        func deepChainFinishedInsideAStart() async {
            let depth = TestSize.attack.depth
            let live = LiveCount()
            let (tail, top, left) = await onDeepStack("shared attempts chain finished in start", size: .attack) {
                let shared = SharedAttempts<Int, Int, TestError>()
                let root = HeldWriter<Int, TestError>()
                let tracked = LifetimeTracked(live)
                let tail = chainOfRuns(
                    in: shared, depth: depth,
                    root: root.attempt.map(upon: .immediate) { [tracked] value in
                        withExtendedLifetime(tracked) { value }
                    })
                let top = shared.attempt(for: depth) { key in
                    let joiner = shared.attempt(for: key - 1) { _ in
                        Issue.record("nested start for a key in flight")
                        return Attempt(succeededWith: -1)
                    }
                    root.succeed(with: 7)
                    return joiner
                }
                return (tail.peek(), top.peek(), shared.count)
            }
            #expect(tail == .success(7) && top == .success(7))
            #expect(left == 0)
            #expect(live.value == 0)
        }

        /// The same chain cancelled from inside a start: the last caller of the tail gives up
        /// inside the start of another key, whose work is finished; every run stops once.
        @Test(.timeLimit(.minutes(2)), .skippedUnderThreadSanitizer)
        func deepChainCancelledInsideAStart() async {
            let depth = TestSize.attack.depth
            let (tail, stops, left, other) = await onDeepStack(
                "shared attempts chain cancelled in start", size: .attack
            ) {
                let shared = SharedAttempts<Int, Int, TestError>()
                let root = HeldWriter<Int, TestError>()
                let stops = Counter()
                root.onCancel { stops.increment() }
                let tail = chainOfRuns(in: shared, depth: depth, root: root.attempt)
                let other = shared.attempt(for: -1) { _ in
                    tail.cancel()
                    return Attempt(succeededWith: 1)
                }
                return (tail.peek(), stops.value, shared.count, other.peek())
            }
            #expect(tail == .failure(.cancelled) && stops == 1 && left == 0 && other == .success(1))
        }

        // MARK: SharedAttempts, races

        /// A work finished at start, against a joiner that cancels at once.
        ///
        /// Left starts a run whose work is finished at start; right asks the same key and cancels
        /// its attempt at once. Left never sees a cancellation, both end decided, the table empties.
        @Test(.timeLimit(.minutes(3)))
        func finishedAtStartAgainstJoinAndCancel() {
            final class Round: Sendable {
                let shared = SharedAttempts<Int, Int, TestError>()
                let leftStarted = Atomic<Bool>(false)
                let rightStarted = Atomic<Bool>(false)
                let left = NSLocked<Attempt<Int, TestError>?>(nil)
                let right = NSLocked<Result<Int, TestError>?>(nil)
            }
            RaceHarness.expectInterleavings(
                "finished at start against join and cancel",
                rounds: TestSize.attack.raceRounds,
                expected: ["left started, right joined", "right started, left joined", "both started"],
                setup: { Round() },
                left: { round in
                    let a = round.shared.attempt(for: 0) { _ in
                        round.leftStarted.store(true, ordering: .releasing)
                        RaceHarness.pause(300)
                        return Attempt(succeededWith: 1)
                    }
                    round.left.withLock { $0 = a }
                },
                right: { round in
                    let b = round.shared.attempt(for: 0) { _ in
                        round.rightStarted.store(true, ordering: .releasing)
                        RaceHarness.pause(300)
                        return Attempt(succeededWith: 2)
                    }
                    b.cancel()
                    round.right.withLock { $0 = b.peek() }
                },
                classify: { round in
                    // Left may have joined right's run in flight: wait for it.
                    let l = round.left.withLock { $0 }?.wait(until: .now() + 5)
                    let r = round.right.withLock { $0 }
                    let ls = round.leftStarted.load(ordering: .acquiring)
                    let rs = round.rightStarted.load(ordering: .acquiring)
                    guard l == .success(1) || (l == .success(2) && !ls) else {
                        return "BUG: left got \(String(describing: l)) (left started \(ls))"
                    }
                    guard let r, r == .failure(.cancelled) || r == .success(2) || (r == .success(1) && !rs) else {
                        return "BUG: right got \(String(describing: r))"
                    }
                    guard round.shared.count == 0 else { return "BUG: key left in the table" }
                    switch (ls, rs) {
                    case (true, true): return "both started"
                    case (true, false): return "left started, right joined"
                    case (false, true): return "right started, left joined"
                    default: return "BUG: nobody started"
                    }
                })
        }

        /// Left starts a run whose work right cancels directly (as its producer would) on another
        /// thread, before or after `start` returns: every caller ends cancelled, the cancel handler
        /// runs once, the key is forgotten and the next ask starts anew.
        @Test(.timeLimit(.minutes(3)))
        func workCancelledElsewhereWhileStartLinksIt() {
            final class Round: Sendable {
                let shared = SharedAttempts<Int, Int, TestError>()
                let writer = HeldWriter<Int, TestError>()
                let stops = Counter()
                let cancelledInStart = Atomic<Bool>(false)
                let caller = NSLocked<Attempt<Int, TestError>?>(nil)
                init() { writer.onCancel { [stops] in stops.increment() } }
            }
            RaceHarness.expectInterleavings(
                "work cancelled elsewhere while start links it",
                rounds: TestSize.attack.raceRounds,
                expected: ["cancelled before start returned", "cancelled after start returned"],
                setup: { Round() },
                left: { round in
                    let a = round.shared.attempt(for: 0) { _ in
                        RaceHarness.pause(100)
                        round.cancelledInStart.store(round.writer.isFilled, ordering: .releasing)
                        return round.writer.attempt
                    }
                    round.caller.withLock { $0 = a }
                },
                right: { round in
                    round.writer.attempt.cancel()
                },
                classify: { round in
                    let a = round.caller.withLock { $0 }!
                    guard a.wait(until: .now() + 5) == .failure(.cancelled) else {
                        return "BUG: caller got \(String(describing: a.peek()))"
                    }
                    guard round.stops.value == 1 else { return "BUG: cancel handler ran \(round.stops.value) times" }
                    guard round.shared.count == 0 else { return "BUG: key left" }
                    let next = round.shared.attempt(for: 0) { _ in Attempt(succeededWith: 3) }
                    guard next.peek() == .success(3) else { return "BUG: next ask joined the cancelled run" }
                    return round.cancelledInStart.load(ordering: .acquiring)
                        ? "cancelled before start returned" : "cancelled after start returned"
                })
        }

        /// A joiner's cancel against the parked delivery of a work finished at start.
        ///
        /// Right joins the run while left's `start` runs and cancels at once; left's work is
        /// finished at start, so the run decides through the parked path. A delivery to right that
        /// had not started when its `cancel()` returned never runs: one queued on an executor that
        /// runs only after both sides returned is always withdrawn. (A callback on `.immediate` may
        /// already be running on left's thread when the cancel returns, which guarantee 10 allows,
        /// so that callback only tells the outcomes apart.)
        @Test(.timeLimit(.minutes(3)))
        func joinerCancelAgainstParkedDelivery() {
            final class Round: Sendable {
                let shared = SharedAttempts<Int, Int, TestError>()
                let inStart = Atomic<Bool>(false)
                let delivered = Counter()
                /// Runs only in `classify`, after both sides returned.
                let later = ManualExecutor()
                let lateDeliveries = Counter()
                let rightStarted = Atomic<Bool>(false)
                let leftStarted = Atomic<Bool>(false)
                let left = NSLocked<Attempt<Int, TestError>?>(nil)
            }
            RaceHarness.expectInterleavings(
                "joiner cancel against parked delivery",
                rounds: TestSize.attack.raceRounds,
                expected: ["joined, delivered before cancel", "joined, cancelled before delivery", "right started"],
                setup: { Round() },
                left: { round in
                    let a = round.shared.attempt(for: 0) { _ in
                        round.inStart.store(true, ordering: .releasing)
                        round.leftStarted.store(true, ordering: .releasing)
                        RaceHarness.pause(500)
                        return Attempt(succeededWith: 1)
                    }
                    round.left.withLock { $0 = a }
                },
                right: { round in
                    var spins = 0
                    while !round.inStart.load(ordering: .acquiring) && spins < 2_000 { spins += 1 }
                    let b = round.shared.attempt(for: 0) { _ in
                        round.rightStarted.store(true, ordering: .releasing)
                        return Attempt(succeededWith: 2)
                    }
                    b.uponSuccess(.immediate) { _ in round.delivered.increment() }
                    b.uponSuccess(round.later) { _ in round.lateDeliveries.increment() }
                    b.cancel()
                },
                classify: { round in
                    // Left may have joined right's run in flight: wait for it.
                    let l = round.left.withLock { $0 }?.wait(until: .now() + 5)
                    let ls = round.leftStarted.load(ordering: .acquiring)
                    guard l == .success(1) || (!ls && l == .success(2)) else {
                        return "BUG: left got \(String(describing: l)), left started \(ls)"
                    }
                    _ = round.later.runUntilIdle()
                    guard round.lateDeliveries.value == 0 else { return "BUG: delivered after cancel returned" }
                    guard round.shared.count == 0 else { return "BUG: key left" }
                    if round.rightStarted.load(ordering: .acquiring) { return "right started" }
                    return round.delivered.value == 1
                        ? "joined, delivered before cancel" : "joined, cancelled before delivery"
                })
        }

        // MARK: SharedFutures

        /// A chain of runs 20,000 deep whose works are `lazy.map` views of the previous run.
        @Test(.timeLimit(.minutes(2)), .skippedUnderThreadSanitizer)
        func futuresChainOfLazyMapViews() async {
            let depth = TestSize.attack.depth
            let (tail, left) = await onDeepStack("shared futures chain of lazy.map views", size: .attack) {
                let shared = SharedFutures<Int, Int>()
                let root = Deferred<Int>()
                var tail = Future(root)
                for key in 0..<depth {
                    let previous = tail
                    tail = shared.future(for: key) { _ in previous.lazy.map { $0 + 1 } }
                }
                root.fill(with: 0)
                return (tail.peek(), shared.count)
            }
            #expect(tail == depth && left == 0)
        }

        /// A chain 20,000 deep built by re-entrant asks (key n's start joins key n-1), whose root is
        /// filled inside the start of one more key, which returns the filled joiner.
        @Test(.timeLimit(.minutes(2)), .skippedUnderThreadSanitizer)
        func futuresChainFilledInsideAStart() async {
            let depth = TestSize.attack.depth
            let (tail, top, left) = await onDeepStack("shared futures chain filled in start", size: .attack) {
                let shared = SharedFutures<Int, Int>()
                let root = Deferred<Int>()
                var tail = shared.future(for: 0) { _ in root }
                for key in 1..<depth {
                    tail = shared.future(for: key) { key in
                        shared.future(for: key - 1) { _ in
                            Issue.record("nested start for a key in flight")
                            return Future(filledWith: -1)
                        }
                    }
                }
                let top = shared.future(for: depth) { key in
                    let joined = shared.future(for: key - 1) { _ in Future(filledWith: -1) }
                    root.fill(with: 7)
                    return joined
                }
                return (tail.peek(), top.peek(), shared.count)
            }
            #expect(tail == 7 && top == 7 && left == 0)
        }

        /// A chain of runs outlives its table.
        ///
        /// The table dropped mid-chain, twice: before the fill, and by a handler during the fill's
        /// cascade. Every run still fills; captures of the works and of the callers' handlers go.
        @Test(.timeLimit(.minutes(2)), .skippedUnderThreadSanitizer)
        func futuresChainOutlivesItsTable() async {
            let depth = TestSize.attack.depth
            let live = LiveCount()
            let (tails, tablesGone, handlers) = await onDeepStack("shared futures chain, table dropped", size: .attack)
            {
                var tails: [Int?] = []
                var gone: [Bool] = []
                let handlerRuns = Counter()
                for dropDuringFill in [false, true] {
                    weak var weakTable: SharedFutures<Int, Int>?
                    let holder = NSLocked<SharedFutures<Int, Int>?>(SharedFutures<Int, Int>())
                    let root = Deferred<Int>()
                    var tail = Future(root)
                    do {
                        let shared = holder.withLock { $0 }!
                        weakTable = shared
                        for key in 0..<depth {
                            let previous = tail
                            let tracked = LifetimeTracked(live)
                            tail = shared.future(for: key) { _ in
                                previous.map(upon: .immediate) { [tracked] value in
                                    withExtendedLifetime(tracked) { value + 1 }
                                }
                            }
                            if key == depth / 2 {
                                let t2 = LifetimeTracked(live)
                                tail.upon(.immediate) { [t2] _ in
                                    withExtendedLifetime(t2) {}
                                    handlerRuns.increment()
                                    if dropDuringFill { holder.withLock { $0 = nil } }
                                }
                            }
                        }
                    }
                    if !dropDuringFill { holder.withLock { $0 = nil } }
                    let goneBefore = weakTable == nil
                    root.fill(with: 0)
                    tails.append(tail.peek())
                    gone.append(weakTable == nil && (dropDuringFill ? !goneBefore : goneBefore))
                }
                return (tails, gone, handlerRuns.value)
            }
            #expect(tails == [depth, depth])
            #expect(tablesGone == [true, true])
            #expect(handlers == 2)
            #expect(live.value == 0, "\(live.value) captures left")
        }

        /// Works of a user-written future type.
        ///
        /// A forwarding future over a pending deferred, over a filled one, and a short chain of
        /// them over runs. Each key is forgotten before its value is seen, each work gets one
        /// handler at most, and every caller is released.
        @Test func futuresWorkOfAUserWrittenType() {
            let shared = SharedFutures<Int, Int>()
            let live = LiveCount()
            let pendingBase = Deferred<Int>()
            let pendingWork = ForwardingFuture(base: pendingBase)
            let sawKey = NSLocked<Bool?>(nil)
            do {
                let tracked = LifetimeTracked(live)
                let a = shared.future(for: 0) { _ in pendingWork }
                a.upon(.immediate) { [tracked] _ in
                    withExtendedLifetime(tracked) {}
                    sawKey.withLock { $0 = shared.contains(0) }
                }
            }
            pendingBase.fill(with: 1)
            #expect(sawKey.withLock { $0 } == false)
            #expect(pendingWork.handlers.value == 1 && shared.count == 0)

            let filledWork = ForwardingFuture(base: Future(filledWith: 2))
            #expect(shared.future(for: 1) { _ in filledWork }.peek() == 2)
            #expect(filledWork.handlers.value == 0, "a filled user future is read in place")
            #expect(!shared.contains(1))

            let counting = CountingFuture(base: Deferred<Int>())
            let c = shared.future(for: 2) { _ in counting }
            counting.base.fill(with: 3)
            #expect(c.peek() == 3 && counting.handlers.value == 1 && shared.count == 0)

            let root = Deferred<Int>()
            var tail = Future(root)
            for key in 10..<510 {
                let previous = tail
                tail = shared.future(for: key) { _ in ForwardingFuture(base: previous.lazy.map { $0 + 1 }) }
            }
            root.fill(with: 0)
            #expect(tail.peek() == 500 && shared.count == 0)
            #expect(live.value == 0)
        }

        /// Re-entrant asks from a joiner's handler while an already-filled work fills the run: the
        /// key is gone, the ask starts anew; with values kept, it gets the kept value.
        @Test func futuresJoinerHandlerReasksDuringFill() {
            for keeping in [false, true] {
                let clock = VirtualTimeExecutor()
                let shared =
                    keeping
                    ? SharedFutures<Int, Int>(keepingValuesFor: .seconds(1), upon: clock) : SharedFutures<Int, Int>()
                let starts = Counter()
                let report = NSLocked<String?>(nil)
                let f = shared.future(for: 0) { key in
                    starts.increment()
                    shared.future(for: key) { _ in Future(filledWith: -1) }.upon(.immediate) { value in
                        let contained = shared.contains(key)
                        let again = shared.future(for: key) { _ in
                            starts.increment()
                            return Future(filledWith: value + 1)
                        }
                        report.withLock { $0 = "contains \(contained), again \(String(describing: again.peek()))" }
                    }
                    return Future(filledWith: 5)
                }
                #expect(f.peek() == 5)
                #expect(
                    report.withLock { $0 }
                        == (keeping ? "contains true, again Optional(5)" : "contains false, again Optional(6)"),
                    "keeping \(keeping)")
                #expect(starts.value == (keeping ? 1 : 2))
                clock.advance(by: .seconds(1))
                #expect(shared.count == 0)
            }
        }
    }
}
