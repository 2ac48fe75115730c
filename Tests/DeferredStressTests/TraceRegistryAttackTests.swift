import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

/// The file every writer of this suite is made in, as a dump names its place.
private let attackFile = "DeferredStressTests/TraceRegistryAttackTests.swift"

/// The chains of `dump` whose writer was made in this file.
private func mine(_ dump: PendingDump) -> [PendingChain] {
    dump.chains.filter { $0.source.place?.hasPrefix(attackFile) ?? false }
}

/// The chains of `dump` whose writer was made at `line` of this file.
private func chains(at line: UInt, in dump: PendingDump) -> [PendingChain] {
    dump.chains.filter { $0.source.place == "\(attackFile):\(line)" }
}

/// Runs `body` on a thread with a big stack; stops the process if it has not returned after
/// `seconds` (a deadlock on the registry's lock would hang every later test).
private func finishes(_ name: String, within seconds: Double = 300, _ body: @escaping @Sendable () -> Void) {
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        body()
        done.signal()
    }
    thread.stackSize = 16 << 20
    thread.start()
    if done.wait(timeout: .now() + seconds) == .timedOut {
        print("TraceRegistryAttackTests: \(name) did not finish within \(seconds) s: deadlock")
        fatalError("\(name): deadlock")
    }
}

/// Stops the process if `done` is not raised within `seconds`: for async tests, which cannot
/// block in ``finishes(_:within:_:)``.
private func watchdog(_ name: String, within seconds: Double = 300) -> Flag {
    let done = Flag()
    Thread {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while !done.isRaised {
            if ContinuousClock.now > deadline {
                print("TraceRegistryAttackTests: \(name) did not finish within \(seconds) s: deadlock")
                fatalError("\(name): deadlock")
            }
            usleep(10_000)
        }
    }.start()
    return done
}

/// A lock-free stop flag.
private final class Flag: Sendable {
    private let raised = Atomic<Bool>(false)
    var isRaised: Bool { raised.load(ordering: .acquiring) }
    func raise() { raised.store(true, ordering: .releasing) }
}

/// Loops `PendingFutures.snapshotDump`, `all`, `pendingInScope` until `stop`; returns how many.
private func dumpUntil(_ stop: Flag) -> Int {
    var dumps = 0
    while !stop.isRaised {
        let dump = PendingFutures.snapshotDump
        _ = dump.description
        _ = PendingFutures.all.count
        _ = PendingFutures.pendingInScope
        dumps += 1
    }
    return dumps
}

extension StressSuites {
    /// Attacks on the registry of `PendingFutures`: storages released on other threads while dumps
    /// read them, deep chains, stale identities, lints, growth.
    ///
    /// Serialized (inside ``StressSuites``): some switch ``PendingFutures/isTracking`` on.
    @Suite struct TraceRegistryAttackTests {
        // MARK: Races: release on other threads while dumping

        /// Two threads make, link, fill and drop recorded futures and attempts of every kind while a
        /// third dumps in a loop: no crash, no deadlock, and nothing of this file is left pending.
        @Test func dumpsRacingEveryKindOfReleaseNeitherCrashNorDeadlock() {
            let rounds = TestSize.attackLoop(TestSize.sanitized(4_000))
            PendingFutures.isTracking = true
            defer { PendingFutures.isTracking = false }
            let stop = Flag()
            let dumps = Atomic<Int>(0)
            finishes("dumpsRacingEveryKindOfRelease") {
                let dumper = Thread {
                    dumps.store(dumpUntil(stop), ordering: .relaxed)
                }
                dumper.start()
                DispatchQueue.concurrentPerform(iterations: 2) { side in
                    for round in 0..<rounds {
                        churn(round: round, side: side)
                    }
                }
                stop.raise()
                while dumps.load(ordering: .relaxed) == 0 { usleep(1_000) }
            }
            // Every writer of the churn was filled or dropped: none of this file is pending.
            let left = mine(PendingFutures.snapshotDump)
            #expect(left.isEmpty, "\(left.count) chains left, first: \(left.first.map(String.init(describing:)) ?? "")")
        }

        /// Scopes open and close on both threads (each closing releases its writers) while a third
        /// thread dumps.
        @Test func scopesClosingOnManyThreadsWhileDumping() {
            let rounds = TestSize.attackLoop(TestSize.sanitized(3_000))
            let stop = Flag()
            let leftOver = Atomic<Int>(0)
            finishes("scopesClosingOnManyThreadsWhileDumping") {
                let dumper = Thread { _ = dumpUntil(stop) }
                dumper.start()
                DispatchQueue.concurrentPerform(iterations: 2) { side in
                    for round in 0..<rounds {
                        let (_, pending) = PendingFutures.madeDuring {
                            churn(round: round, side: side)
                            _ = PendingFutures.pendingInScope
                        }
                        leftOver.add(pending.count, ordering: .relaxed)
                    }
                }
                stop.raise()
            }
            #expect(leftOver.load(ordering: .relaxed) == 0)
        }

        /// The last reference to a recorded storage is dropped on one thread in the instant a dump
        /// on another reads it: a dump takes a strong reference to each storage it reads, under
        /// the registry's lock, and if that reference turns out to be the last, the storage's
        /// `deinit` runs on the dumping thread and waits for the lock the thread holds.
        @Test func lastReleaseDuringASnapshotDoesNotDeadlock() {
            // Time-bounded: a deadlock showed within the first second in every run that had one.
            let seconds = TestSize.current.profile == .full ? 10.0 : 3.0
            PendingFutures.isTracking = true
            defer { PendingFutures.isTracking = false }
            let stop = Flag()
            let dumps = Atomic<Int>(0)
            let released = Atomic<Int>(0)
            finishes("lastReleaseDuringASnapshot", within: seconds + 120) {
                let dumper = Thread { dumps.store(dumpUntil(stop), ordering: .relaxed) }
                dumper.start()
                let deadline = ContinuousClock.now + .seconds(seconds)
                DispatchQueue.concurrentPerform(iterations: 2) { _ in
                    // Many recorded storages alive at once, so that a dump reads many; each
                    // dropped (and released) soon after.
                    var held: [Deferred<Int>] = []
                    var round = 0
                    while ContinuousClock.now < deadline {
                        held.append(Deferred<Int>())
                        if held.count > 64 {
                            held.removeFirst(32)
                            released.add(32, ordering: .relaxed)
                        }
                        if round % 3 == 0 { held[held.count - 1].fill(with: round) }
                        round += 1
                    }
                    for future in held { future.fill(with: 0) }
                }
                stop.raise()
                while dumps.load(ordering: .relaxed) == 0 { usleep(1_000) }
            }
            progress(
                "lastReleaseDuringASnapshot: \(dumps.load(ordering: .relaxed)) dumps, "
                    + "\(released.load(ordering: .relaxed)) releases")
        }

        /// A 10,000-stage `map` chain is made, dumped, filled and released while another thread
        /// dumps.
        @Test func deepChainReleasedWhileDumping() {
            let depth = 10_000
            let stop = Flag()
            let elapsed = Atomic<Int>(0)
            finishes("deepChainReleasedWhileDumping") {
                // A big stack for the dumper: the overflow is another test's.
                let dumper = Thread { _ = dumpUntil(stop) }
                dumper.stackSize = 64 << 20
                dumper.start()
                let (_, pending) = PendingFutures.madeDuring {
                    let line: UInt = #line + 1
                    let root = Deferred<Int>()
                    var tail = Future(root)
                    for _ in 0..<depth {
                        tail = tail.map(upon: .immediate) { $0 + 1 }
                    }
                    tail.upon(.immediate) { _ in }
                    let started = ContinuousClock.now
                    let dump = PendingFutures.snapshotDump
                    elapsed.store(Int((ContinuousClock.now - started) / .milliseconds(1)), ordering: .relaxed)
                    let deep = chains(at: line, in: dump)
                    #expect(deep.count == 1)
                    #expect(deep.first?.links.count == depth + 2)
                    root.fill(with: 0)
                    #expect(tail.peek() == depth)
                }
                #expect(pending.isEmpty)
                stop.raise()
            }
            #expect(
                elapsed.load(ordering: .relaxed) < 5_000,
                "one dump of a 10,000-deep chain took \(elapsed.load(ordering: .relaxed)) ms")
        }

        /// A dump of a deep pending chain on a Dispatch worker thread, whose stack is small: the
        /// dump walks the chain recursively.
        @Test func deepChainDumpedOnADispatchThread() async {
            let depth = TestSize.current.depth
            let result = await withCheckedContinuation { (continuation: CheckedContinuation<Int, Never>) in
                DispatchQueue.global().async {
                    let (count, _) = PendingFutures.madeDuring {
                        let root = Deferred<Int>()
                        var tail = Future(root)
                        for _ in 0..<depth {
                            tail = tail.map(upon: .immediate) { $0 + 1 }
                        }
                        let count = PendingFutures.pendingInScope.first?.chains.first?.links.count ?? 0
                        root.fill(with: 0)
                        return count
                    }
                    continuation.resume(returning: count)
                }
            }
            #expect(result == depth + 1)
        }

        /// Joins, timeouts firing, shared runs whose callers cancel, awaiting tasks cancelled and
        /// threads waiting with timeouts, all while dumping.
        @Test func waitersGivingUpWhileDumping() async {
            let rounds = TestSize.attackLoop(TestSize.sanitized(300))
            PendingFutures.isTracking = true
            defer { PendingFutures.isTracking = false }
            let done = watchdog("waitersGivingUpWhileDumping")
            defer { done.raise() }
            let stop = Flag()
            let dumper = Thread { _ = dumpUntil(stop) }
            dumper.start()
            let shared = SharedAttempts<Int, Int, TestError>()
            for round in 0..<rounds {
                let writer = DeferredAttempt<Int, TestError>()
                let deferred = Deferred<Int>()
                let awaited = writer.attempt
                let task = Task { try await awaited.get() }
                let plain = Task { await deferred.value }
                let work = writer.attempt
                let callers = (0..<3).map { _ in shared.attempt(for: round) { _ in work } }
                let thread = Thread { _ = deferred.wait(for: .microseconds(200)) }
                thread.start()
                let limited = writer.attempt.timeout(
                    after: .microseconds(100), upon: DispatchQueue.global(), failingWith: .timedOut)
                let joined = [writer.attempt, limited].allSucceeded()
                joined.upon(.immediate) { _ in }
                await Task.yield()
                task.cancel()
                for caller in callers { caller.cancel() }
                if round % 2 == 0 { _ = writer.succeed(with: round) }
                deferred.fill(with: round)
                _ = await plain.value
                _ = await task.result
            }
            stop.raise()
            try? await Task.sleep(for: .milliseconds(50))
            let left = mine(PendingFutures.snapshotDump)
            #expect(left.isEmpty, "\(left.map(String.init(describing:)))")
        }

        // MARK: The registry returns to its baseline

        /// After every writer of a long tracked run is filled and released, the dump lists no chain
        /// of this file, and a second dump neither.
        @Test func chainsReturnToBaselineAfterEverythingIsReleased() {
            PendingFutures.isTracking = true
            defer { PendingFutures.isTracking = false }
            let baseline = mine(PendingFutures.snapshotDump).count
            var writers: [Deferred<Int>] = []
            var attempts: [AttemptWriterBox] = []
            var stages: [Future<Int>] = []
            for index in 0..<5_000 {
                let writer = Deferred<Int>()
                stages.append(writer.map(upon: .immediate) { $0 })
                writers.append(writer)
                let attempt = AttemptWriterBox()
                attempt.writer.attempt.upon(.immediate) { _ in }
                attempts.append(attempt)
                if index % 2 == 0 { _ = writer.timeout(after: .seconds(60), upon: HeldTimers(), substituting: 0) }
            }
            #expect(mine(PendingFutures.snapshotDump).count >= 10_000)
            for (index, writer) in writers.enumerated() { writer.fill(with: index) }
            for attempt in attempts { _ = attempt.writer.succeed(with: 0) }
            writers = []
            attempts = []
            stages = []
            #expect(mine(PendingFutures.snapshotDump).count == baseline)
            #expect(PendingFutures.all.filter { $0.file == attackFile }.isEmpty)
        }

        /// A tracked run with limits that pass while their work runs, nothing dumping: the entries
        /// kept for those limits (so that a dump can report them) outlive everything, unbounded,
        /// until some dump happens to prune them.
        @Test func passedLimitsKeepNoEntryOnceEverythingIsGone() {
            let cycles = 200_000
            PendingFutures.isTracking = true
            defer { PendingFutures.isTracking = false }
            _ = PendingFutures.snapshotDump  // prunes what earlier tests left
            let clock = HeldTimers()
            let before = residentMemory() ?? 0
            for index in 0..<cycles {
                let source = Deferred<Int>()
                _ = source.timeout(after: .seconds(1), upon: clock, substituting: 0)
                clock.fireAll()  // the limit passes while the source is pending: kept for the lint
                source.fill(with: index)
            }
            let grown = (residentMemory() ?? 0) - before
            #expect(grown < 20 << 20, "RSS grew by \(grown >> 20) MB for \(cycles) filled and released timeouts")
            _ = PendingFutures.snapshotDump
        }

        /// A recorded future that is filled and kept (a cached value) and read with `upon` many
        /// times: each callback runs at once, and the registry keeps nothing of it.
        @Test func callbacksOnAFilledRecordedFutureAreNotKept() {
            let reads = 1_000_000
            let grown = PendingFutures.madeDuring { () -> Int in
                let cached = Deferred<Int>()
                cached.fill(with: 1)
                let before = residentMemory() ?? 0
                for _ in 0..<reads {
                    cached.upon(.immediate) { _ in }
                }
                return (residentMemory() ?? 0) - before
            }.result
            #expect(grown < 20 << 20, "RSS grew by \(grown >> 20) MB for \(reads) callbacks on a filled future")
        }

        /// A recorded future that stays pending, polled by a thread with short blocking waits: each
        /// wait that timed out is over, and the registry keeps nothing of it (the same loop on an
        /// unrecorded future is the baseline).
        @Test func timedOutWaitsOnAPendingRecordedFutureAreNotKept() {
            // A quarter of the resident-memory test's waits: each sleeps its 20 µs and more.
            let waits = TestSize.sanitized(TestSize.current.timedOutWaits / 4)
            func poll(_ pending: Deferred<Int>) -> Int {
                let before = residentMemory() ?? 0
                for _ in 0..<waits {
                    _ = pending.wait(until: .now() + .microseconds(20))
                }
                return (residentMemory() ?? 0) - before
            }
            let unrecorded = Deferred<Int>()
            let baseline = poll(unrecorded)
            unrecorded.fill(with: 0)
            let grown = PendingFutures.madeDuring { () -> Int in
                let pending = Deferred<Int>()
                let grown = poll(pending)
                let chains = PendingFutures.pendingInScope.first?.chains.count ?? 0
                #expect(chains == 1, "the writer alone: its waits are over")
                pending.fill(with: 0)
                return grown
            }.result
            progress(
                "timedOutWaits: RSS grew by \(baseline >> 10) KiB unrecorded, \(grown >> 10) KiB recorded, for \(waits) waits"
            )
            #expect(grown - baseline < waits * 16, "\((grown - baseline) / waits) bytes kept per wait that timed out")
        }

        // MARK: Identities reused

        /// A pending `andThen` stage whose first source was filled and released keeps that
        /// source's identity: a new writer made at the same address gets the stage in its chains.
        @Test func aStageIsNotAttachedToANewWriterAtItsDeadSourcesAddress() {
            var wrong: [String] = []
            // Tracking, not a scope: a scope holds its writers until it returns.
            PendingFutures.isTracking = true
            defer { PendingFutures.isTracking = false }
            for _ in 0..<50 {
                let inner = Deferred<Int>()
                var stage: Future<Int>?
                do {
                    let outer = Deferred<Int>()
                    stage = outer.andThen(upon: .immediate) { _ in inner }
                    outer.fill(with: 1)
                }
                // `outer` is gone; its memory is likely reused by the next storage of its size.
                let line: UInt = #line + 1
                let fresh = Deferred<Int>()
                for chain in chains(at: line, in: PendingFutures.snapshotDump) where chain.links.count > 1 {
                    wrong.append(chain.description)
                }
                fresh.fill(with: 0)
                inner.fill(with: 2)
                _ = stage
            }
            #expect(
                wrong.count == 0,
                "a fresh, unread writer listed with another's stage, \(wrong.count) times: \(wrong.first ?? "")")
        }

        /// A limit that passed, kept for the lint after its storage and its source are gone, is
        /// not reported about a new writer made at the dead source's address.
        @Test func aPassedLimitIsNotReportedAboutANewWriterAtItsSourcesAddress() {
            PendingFutures.isTracking = true
            defer { PendingFutures.isTracking = false }
            _ = PendingFutures.snapshotDump
            let clock = HeldTimers()
            var falseLints: [String] = []
            for index in 0..<50 {
                do {
                    let source = Deferred<Int>()
                    _ = source.timeout(after: .seconds(1), upon: clock, substituting: 0)
                    clock.fireAll()
                    source.fill(with: index)
                }
                // No work runs above the limit any more; the next storage may take the source's
                // place.
                let line: UInt = #line + 1
                let fresh = Deferred<Int>()
                let lints = PendingFutures.snapshotDump.lints.filter {
                    $0.kind == .limitPassedWhileWorkRuns && $0.message.contains("\(attackFile):\(line)")
                }
                falseLints += lints.map(\.message)
                fresh.fill(with: 0)
            }
            #expect(falseLints.count == 0, "\(falseLints.count) false lints, first: \(falseLints.first ?? "")")
        }

        // MARK: Lints

        /// A failed attempt dropped unobserved is reported once; one whose failure a stage, a
        /// `peek`, an `upon` received, or a cancelled or abandoned one, is not.
        @Test func unobservedFailureLintsExactlyTheUnobserved() {
            func lints(mentioning marker: String) -> [PendingLint] {
                PendingFutures.snapshotDump.lints.filter {
                    $0.kind == .unobservedFailure && $0.message.contains(marker)
                }
            }
            // Dropped unobserved: one lint.
            let (_, _) = PendingFutures.madeDuring {
                _ = Attempt<Int, TestError>(failedWith: .failed(1)).named("attack-dropped")
            }
            #expect(lints(mentioning: "attack-dropped").count == 1)

            // Observed by a `map` made after it failed: the source's failure was received.
            let (_, _) = PendingFutures.madeDuring {
                let failed = Attempt<Int, TestError>(failedWith: .failed(2)).named("attack-mapped")
                failed.map(upon: .immediate) { $0 + 1 }.upon(.immediate) { _ in }
            }
            #expect(lints(mentioning: "attack-mapped").isEmpty)

            // Observed by `peek` and by `upon`.
            let (_, _) = PendingFutures.madeDuring {
                _ = Attempt<Int, TestError>(failedWith: .failed(3)).named("attack-peeked").peek()
                Attempt<Int, TestError>(failedWith: .failed(4)).named("attack-upon").upon(.immediate) { _ in }
            }
            #expect(lints(mentioning: "attack-peeked").isEmpty)
            #expect(lints(mentioning: "attack-upon").isEmpty)

            // Observed by a join and a timeout made after it failed.
            let (_, _) = PendingFutures.madeDuring {
                let failed = Attempt<Int, TestError>(failedWith: .failed(5)).named("attack-joined")
                [failed].allSucceeded().upon(.immediate) { _ in }
                let other = Attempt<Int, TestError>(failedWith: .failed(6)).named("attack-limited")
                other.timeout(after: .seconds(1), upon: HeldTimers(), failingWith: .timedOut).upon(.immediate) { _ in }
            }
            #expect(lints(mentioning: "attack-joined").isEmpty)
            #expect(lints(mentioning: "attack-limited").isEmpty)

            // Cancelled, abandoned: no lint.
            let (_, _) = PendingFutures.madeDuring {
                let cancelled = DeferredAttempt<Int, TestError>()
                _ = cancelled.attempt.named("attack-cancelled")
                cancelled.attempt.cancel()
                let abandoned = DeferredAttempt<Int, TestError>()
                _ = abandoned.attempt.named("attack-abandoned")
            }
            #expect(lints(mentioning: "attack-cancelled").isEmpty)
            #expect(lints(mentioning: "attack-abandoned").isEmpty)
        }

        /// A shared run whose every caller cancels, whose work then fails with its cancellation
        /// error: nothing failed unobserved.
        @Test func aSharedRunCancelledByItsCallersIsNoUnobservedFailure() {
            let shared = SharedAttempts<Int, Int, TestError>()
            let (_, _) = PendingFutures.madeDuring {
                let work = DeferredAttempt<Int, TestError>()
                _ = work.attempt.named("attack-shared-work")
                let workAttempt = work.attempt
                let callers = (0..<3).map { _ in shared.attempt(for: 1) { _ in workAttempt } }
                for caller in callers { caller.cancel() }
                let cancelled = work.isCancelled
                #expect(cancelled)
            }
            let lints = PendingFutures.snapshotDump.lints.filter { $0.kind == .unobservedFailure }
            let shown = lints.filter { $0.message.contains("shared run") || $0.message.contains("attack-shared-work") }
            #expect(shown.isEmpty, "\(shown.map(\.message))")
        }

        // MARK: Tracking off

        /// With tracking off, nothing made on this thread is recorded, even while a scope runs on
        /// another thread: not a writer, not a named future.
        @Test func nothingIsRecordedOutsideAScopeWhileAnotherThreadHasOne() {
            let open = DispatchSemaphore(value: 0)
            let close = DispatchSemaphore(value: 0)
            let other = Thread {
                _ = PendingFutures.madeDuring {
                    open.signal()
                    close.wait()
                }
                open.signal()
            }
            other.start()
            open.wait()
            let writer = Deferred<Int>(named: "attack-outside-scope")
            let stage = writer.map(upon: .immediate) { $0 }.named("attack-outside-stage")
            let dump = PendingFutures.snapshotDump
            close.signal()
            open.wait()
            let leaked = dump.chains.filter { chain in
                chain.links.contains { ($0.label ?? "").hasPrefix("attack-outside") }
            }
            #expect(leaked.isEmpty, "recorded with tracking off: \(leaked.map(String.init(describing:)))")
            writer.fill(with: 0)
            _ = stage
        }

        /// With tracking off and no scope, a blocked thread, a task and a callback on an unrecorded
        /// future are not listed.
        @Test func trackingOffRecordsNoWaiter() async {
            let writer = Deferred<Int>()
            let task = Task { await writer.value }
            writer.upon(.immediate) { _ in }
            try? await Task.sleep(for: .milliseconds(10))
            let dump = PendingFutures.snapshotDump
            #expect(mine(dump).isEmpty)
            writer.fill(with: 0)
            _ = await task.value
        }
    }
}

/// A `DeferredAttempt`, which cannot be copied, in a box an array can hold.
private final class AttemptWriterBox: Sendable {
    let writer = DeferredAttempt<Int, TestError>()
}

/// One round of recorded work on one thread: writers, stages, joins, timeouts, attempts, waits.
private func churn(round: Int, side: Int) {
    let writer = Deferred<Int>()
    let mapped = writer.map(upon: .immediate) { $0 + 1 }.map(upon: .immediate) { $0 * 2 }
    mapped.upon(.immediate) { _ in }
    let other = Deferred<Int>()
    let joined = [Future(writer), Future(other)].allFilled()
    let limited = other.timeout(after: .microseconds(20), upon: DispatchQueue.global(), substituting: -1)
    limited.upon(DispatchQueue.global()) { _ in }
    let attemptWriter = DeferredAttempt<Int, TestError>()
    let attempt = attemptWriter.attempt.map(upon: .immediate) { $0 + 1 }
        .timeout(after: .microseconds(30), upon: DispatchQueue.global(), failingWith: .timedOut)
    attempt.upon(.immediate) { _ in }
    let failed = Attempt<Int, TestError>(failedWith: .failed(round))
    let both = [attempt, failed.map(upon: .immediate) { $0 }].allSucceeded()
    both.upon(.immediate) { _ in }
    switch (round + side) % 4 {
    case 0:
        writer.fill(with: round)
        other.fill(with: round)
        _ = attemptWriter.succeed(with: round)
    case 1:
        other.fill(with: round)
        attempt.cancel()
        writer.fill(with: round)
    case 2:
        _ = joined.wait(for: .microseconds(50))
        writer.fill(with: round)
        other.fill(with: round)
        _ = attemptWriter.fail(with: .failed(round))
    default:
        writer.fill(with: round)
        other.fill(with: round)
    // The attempt's writer is dropped: abandoned.
    }
    _ = joined
}
