import Deferred
import Dispatch
import Foundation
import TestSupport
import Testing

@testable import DeferredExecutors

/// What a ``LoopGroup`` and its loops promise beyond any executor that owns a thread (those
/// promises are in `ThreadExecutorTests` and `ThreadExecutorLifecycleTests`, for both kinds).
@Suite struct LoopGroupTests {
    @Test func nextHandsOutEachLoopInTurn() {
        let group = LoopGroup(loops: 3, name: "turns")
        defer { group.shutdown() }
        let handedOut = (0..<6).map { _ in ObjectIdentifier(group.next()) }
        let loops = group.loops.map(ObjectIdentifier.init)
        #expect(Array(handedOut[0..<3]) == loops)
        #expect(Array(handedOut[3..<6]) == loops)
        #expect(group.loops.map(\.name) == ["turns 0", "turns 1", "turns 2"])
    }

    @Test func eachLoopRunsItsBodiesOnAThreadOfItsOwn() {
        let group = LoopGroup(loops: 2, name: "own threads")
        defer { group.shutdown() }
        let threads = group.loops.map { loop in
            let thread = Deferred<ObjectIdentifier>()
            loop.submit { thread.fill(with: currentThreadID()) }
            return thread.value()
        }
        #expect(threads[0] != threads[1])
        #expect(group.loops.allSatisfy { !$0.isCurrent }, "no loop is the test's thread")
    }

    @Test func shutdownStopsEveryLoop() {
        let group = LoopGroup(loops: 2, name: "stopping")
        let ran = Counter()
        for loop in group.loops {
            loop.submit { ran.increment() }
        }
        #expect(group.shutdown().wait(until: .now() + 30) != nil, "every loop's thread exits")
        #expect(group.loops.allSatisfy { $0.isShutDown })
        #expect(ran.value == 2, "bodies submitted before the shutdown ran")
    }

    /// The thread waits for its earliest deadline; a body due sooner, submitted meanwhile from
    /// another thread, wakes it.
    @Test func aDelayedBodyDueSoonerThanTheOneAwaitedWakesTheLoop() {
        let loop = LoopExecutor(name: "sooner")
        defer { loop.shutdown() }
        let idle = Deferred<Void>()
        loop.submit { idle.fill() }
        _ = idle.value()
        loop.submit(after: .seconds(3600)) {}
        let started = ContinuousClock.now
        let ran = Deferred<Duration>()
        loop.submit(after: .milliseconds(10)) { ran.fill(with: ContinuousClock.now - started) }
        let elapsed = ran.wait(until: .now() + 30)
        #expect(elapsed.map { $0 >= .milliseconds(10) } == true, "not before its deadline")
        #expect(elapsed.map { $0 < .seconds(10) } == true, "the loop woke for it: \(String(describing: elapsed))")
    }

    /// A request pinned to a loop: its stages, callback and time limit run on the loop's thread.
    @Test func anAttemptsLimitAndCallbackRunOnTheLoop() {
        let loop = LoopExecutor(name: "pinned")
        defer { loop.shutdown() }
        let writer = DeferredAttempt<Int, any Error>()
        let onLoop = Deferred<Bool>()
        let timedOutOnTheLoop = Deferred<Bool>()
        writer.attempt
            .map(upon: loop) { value in
                onLoop.fill(with: loop.isCurrent)
                return value
            }
            .timeout(after: .milliseconds(20), upon: loop)
            .upon(loop) { result in
                var timedOut = false
                if case .failure(let error) = result {
                    timedOut = error is TimeoutError
                }
                timedOutOnTheLoop.fill(with: loop.isCurrent && timedOut)
            }
        #expect(timedOutOnTheLoop.wait(until: .now() + 30) == true)
        let cancelled = writer.attempt.isCancelled
        #expect(cancelled, "the limit cancelled the work")
        #expect(onLoop.peek() == nil, "the stage never ran")

        let second = DeferredAttempt<Int, any Error>()
        let answer = Deferred<Int>()
        second.attempt.map(upon: loop) { $0 + 1 }
            .timeout(after: .seconds(60), upon: loop)
            .uponSuccess(loop) { answer.fill(with: loop.isCurrent ? $0 : -1) }
        second.succeed(with: 41)
        #expect(answer.wait(until: .now() + 30) == 42)
    }

    /// Limits that their attempts beat are withdrawn from the loop's heap: with limits an hour
    /// long, the heap holds a bounded number of them (the withdrawn ones wait for a pass that
    /// drops them), not one for each limit ever set.
    @Test func limitsThatTheirAttemptsBeatDoNotPileUpOnTheLoop() {
        let loop = LoopExecutor(name: "withdrawn")
        defer { loop.shutdown() }
        let answers = Counter()
        // Above the 2,048 the heap may hold even under a sanitizer (a quarter of the size).
        let count = max(4_000, TestSize.sanitized(10_000))
        for value in 0..<count {
            let writer = DeferredAttempt<Int, any Error>()
            writer.attempt.timeout(after: .seconds(3_600), upon: loop).uponSuccess(.immediate) { _ in
                answers.increment()
            }
            writer.succeed(with: value)
        }
        #expect(answers.value == count)
        #expect(loop.delayedCount <= 2_048, "\(loop.delayedCount) timers wait for limits already beaten")
    }

    /// A limit that passes on a loop still times its attempt out once other limits on the loop
    /// were withdrawn and dropped around it.
    @Test func aLimitPassesAmongWithdrawnOnes() {
        let loop = LoopExecutor(name: "among-withdrawn")
        defer { loop.shutdown() }
        let slow = DeferredAttempt<Int, any Error>()
        let timedOut = Deferred<Bool>()
        slow.attempt.timeout(after: .milliseconds(50), upon: loop).upon(.immediate) { result in
            if case .failure(let error) = result {
                timedOut.fill(with: error is TimeoutError)
            }
        }
        for value in 0..<TestSize.sanitized(5_000) {
            let writer = DeferredAttempt<Int, any Error>()
            writer.attempt.timeout(after: .seconds(3_600), upon: loop).upon(.immediate) { _ in }
            writer.succeed(with: value)
        }
        #expect(timedOut.wait(until: .now() + 30) == true)
        #expect(slow.attempt.isCancelled, "the limit stopped the work")
    }

    /// The limits of attempts whose writers are lost go with them: each attempt fails as
    /// abandoned, which withdraws its limit. (An attempt whose writer lives keeps its limit, which
    /// stops the writer's work when it passes, even if nothing waits for the attempt.)
    @Test func limitsOfAttemptsWhoseWritersAreLostDoNotPileUpOnTheLoop() {
        let loop = LoopExecutor(name: "released")
        defer { loop.shutdown() }
        for _ in 0..<max(4_000, TestSize.sanitized(10_000)) {
            let writer = DeferredAttempt<Int, any Error>()
            _ = writer.attempt.timeout(after: .seconds(3_600), upon: loop)
        }
        #expect(loop.delayedCount <= 2_048, "\(loop.delayedCount) timers wait for attempts already gone")
    }

    /// Delays too long for any clock neither trap nor run, on a loop, a thread and a queue, as
    /// delays and as limits.
    @Test func delaysBeyondAnyClockNeitherTrapNorRun() {
        let loop = LoopExecutor(name: "forever")
        let thread = ThreadExecutor(name: "forever")
        defer {
            loop.shutdown()
            thread.shutdown()
        }
        let ran = Counter()
        let forever = Duration(secondsComponent: .max, attosecondsComponent: 999_999_999_999_999_999)
        let executors: [any SchedulingExecutor] = [loop, thread, DispatchQueue.global()]
        for executor in executors {
            executor.submit(after: forever) { ran.increment() }
            let writer = DeferredAttempt<Int, any Error>()
            writer.attempt.timeout(after: forever, upon: executor).upon(.immediate) { _ in ran.increment() }
            writer.succeed(with: 1)
        }
        #expect(ran.value == 3, "only the three successes ran")
    }
}
