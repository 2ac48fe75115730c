import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import TestSupport
import Testing

extension StressSuites {
    /// Guarantee 5 under load: nothing the library holds outlives its use.
    ///
    /// Memory stays flat over
    /// many fill/upon and attempt cycles (``TestSize/memoryCycles``: 200,000, or a million at
    /// full size) and timed-out waits, handlers and their captures are released on every kind of
    /// executor, and a `ThreadExecutor` leaves no thread behind once shut down.
    ///
    /// The measurements run in child processes (exit tests), so no other test's memory or threads
    /// count.
    @Suite struct ResourceStressTests {
        #if EXIT_TESTS  // a test in a child process; see testSwiftSettings in Package.swift
            /// A blocking wait that timed out left its handler and semaphore on the future until
            /// the fill: some 255 bytes each, 255 MB for a million.
            ///
            /// Each wait sleeps briefly, and the system rounds short sleeps up to tens of
            /// microseconds, so the count follows the test size: 40,000 waits quick, 1,000,000
            /// at full size. Kept, a handler and a semaphore would grow memory by 10 MB over
            /// 40,000 waits, five times the limit.
            @Test(.timeLimit(.minutes(5)), .enabled(if: residentMemory() != nil))
            func residentMemoryStaysFlatOverManyTimedOutWaits() async {
                let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
                    let deferred = Deferred<Int>()
                    func waits(_ count: Int) -> Int {
                        var timedOut = 0
                        for _ in 0..<count where deferred.wait(until: .now() + .microseconds(6)) == nil {
                            timedOut += 1
                        }
                        return timedOut
                    }
                    var timedOut = 0
                    let growth = residentGrowth(warmUp: 10_000, count: TestSize.current.timedOutWaits) {
                        timedOut = waits($0)
                    }
                    print("growth: \(growth)\ntimed out: \(timedOut)")
                    endExitTest(passed: true)
                }
                let report = String(decoding: result?.standardOutputContent ?? [], as: UTF8.self)
                let (growth, timedOut) = (measuredFigure("growth", in: report), measuredFigure("timed out", in: report))
                progress(
                    "timed-out waits on one unfilled future: resident memory grew by \(growth ?? -1) bytes over \(timedOut ?? -1) timed-out waits"
                )
                #expect(timedOut == TestSize.current.timedOutWaits, "every wait timed out")
                #expect(growth.map { $0 < 2_000_000 } == true, "grew by \(growth ?? -1) bytes; the limit is 2 MB")
            }

            @Test(.timeLimit(.minutes(5)), .enabled(if: residentMemory() != nil))
            func residentMemoryStaysFlatOverManyFillUponCycles() async {
                let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
                    func cycles(_ count: Int) {
                        for index in 0..<count {
                            let deferred = Deferred<[Int]>()
                            let mapped = deferred.map(upon: .immediate) { $0.count }
                            deferred.upon(.immediate) { blackHole($0) }
                            mapped.upon(.immediate) { blackHole($0) }
                            deferred.fill(with: [index])
                        }
                    }
                    // Kept, one cycle's objects would cost at least 150 bytes: 30 MB for 200,000.
                    print("growth: \(residentGrowth(warmUp: 100_000, count: TestSize.current.memoryCycles, cycles))")
                    endExitTest(passed: true)
                }
                let report = String(decoding: result?.standardOutputContent ?? [], as: UTF8.self)
                expectFlat(measuredFigure("growth", in: report), over: "fill/upon cycles")
            }

            @Test(.timeLimit(.minutes(5)), .enabled(if: residentMemory() != nil))
            func residentMemoryStaysFlatOverManyAttemptCreateCancelCycles() async {
                let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
                    func cycles(_ count: Int) {
                        for index in 0..<count {
                            let writer = DeferredAttempt<[Int], TestError>()
                            writer.onCancel { blackHole(index) }
                            let mapped = writer.attempt.map(upon: .immediate) { $0.count }
                            mapped.uponSuccess(.immediate) { blackHole($0) }
                            mapped.cancel()
                        }
                    }
                    // Kept, one cycle's objects would cost at least 200 bytes: 40 MB for 200,000.
                    print("growth: \(residentGrowth(warmUp: 100_000, count: TestSize.current.memoryCycles, cycles))")
                    endExitTest(passed: true)
                }
                let report = String(decoding: result?.standardOutputContent ?? [], as: UTF8.self)
                expectFlat(measuredFigure("growth", in: report), over: "attempt create/cancel cycles")
            }

            /// Time limits on a Dispatch queue that their attempts beat (finished or cancelled
            /// first) are withdrawn: their timers do not wait an hour in the queues' shared heap.
            @Test(.timeLimit(.minutes(5)), .enabled(if: residentMemory() != nil))
            func residentMemoryStaysFlatOverManyTimeLimitsBeatenByTheirAttempts() async {
                let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
                    func cycles(_ count: Int) {
                        for index in 0..<count {
                            let writer = DeferredAttempt<[Int], TestError>()
                            let limited = writer.attempt.timeout(
                                after: .seconds(3_600), upon: DispatchQueue.global(), failingWith: .failed(0))
                            limited.uponSuccess(.immediate) { blackHole($0) }
                            if index.isMultiple(of: 2) {
                                writer.succeed(with: [index])
                            } else {
                                limited.cancel()
                            }
                        }
                    }
                    // Kept, one limit's timer would cost at least 100 bytes: 20 MB for 200,000.
                    print("growth: \(residentGrowth(warmUp: 100_000, count: TestSize.current.memoryCycles, cycles))")
                    endExitTest(passed: true)
                }
                let report = String(decoding: result?.standardOutputContent ?? [], as: UTF8.self)
                expectFlat(measuredFigure("growth", in: report), over: "time limits beaten by their attempts")
            }

            /// A table shared by key forgets every key whose run ended: finished, or cancelled by
            /// its last caller (one whose producer was lost included); and its dictionary shrinks
            /// again after a burst of keys in flight at once.
            @Test(.timeLimit(.minutes(5)), .enabled(if: residentMemory() != nil))
            func residentMemoryStaysFlatOverManySharedKeys() async {
                let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
                    let shared = SharedAttempts<Int, [Int], TestError>()
                    var nextKey = 0
                    func cycles(_ count: Int) {
                        var writers: [HeldWriter<[Int], TestError>] = []
                        var waiting: [Attempt<[Int], TestError>] = []
                        func end() {
                            for writer in writers {
                                writer.succeed(with: [writers.count])
                            }
                            for caller in waiting {
                                caller.cancel()
                            }
                            (writers, waiting) = ([], [])
                        }
                        for _ in 0..<count {
                            nextKey += 1
                            let key = nextKey
                            let start: (Int) -> Attempt<[Int], TestError> = { _ in
                                let writer = HeldWriter<[Int], TestError>()
                                writers.append(writer)
                                return writer.attempt
                            }
                            switch key % 3 {
                            case 0:  // finished, with a caller that left and one that stayed
                                shared.attempt(for: key, start: start).cancel()
                                shared.attempt(for: key, start: start).uponSuccess(.immediate) { blackHole($0) }
                            case 1:  // cancelled by its last caller
                                shared.attempt(for: key, start: start).cancel()
                            default:  // lost by its producer, with a caller that gives up later
                                waiting.append(shared.attempt(for: key) { _ in Attempt { _ in } })
                            }
                            // Runs in flight at once: up to a thousand, then all ended.
                            if writers.count >= 1_000 {
                                end()
                            }
                        }
                        end()
                    }
                    let growth = residentGrowth(warmUp: 100_000, count: TestSize.current.memoryCycles, cycles)
                    print("growth: \(growth)\nkeys left: \(shared.count)")
                    endExitTest(passed: true)
                }
                let report = String(decoding: result?.standardOutputContent ?? [], as: UTF8.self)
                #expect(measuredFigure("keys left", in: report) == 0, "every key was forgotten")
                expectFlat(measuredFigure("growth", in: report), over: "shared keys")
            }

            @Test(.timeLimit(.minutes(2)), .enabled(if: threadCount() != nil))
            func shutDownThreadExecutorsLeaveNoThreadBehind() async {
                let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
                    let before = threadCount() ?? 0
                    let executors = (0..<20).map { ThreadExecutor(name: "shut down \($0)") }
                    let ran = Counter()
                    for executor in executors {
                        executor.submit { ran.increment() }
                    }
                    let during = threadCount() ?? 0
                    for executor in executors {
                        await executor.shutdown().value
                    }
                    // A thread reports that it stopped just before it ends; give the system a moment.
                    var after = threadCount() ?? 0
                    for _ in 0..<200 where after > before {
                        try? await Task.sleep(for: .milliseconds(10))
                        after = threadCount() ?? 0
                    }
                    print("before: \(before)\nduring: \(during)\nafter: \(after)\nran: \(ran.value)")
                    endExitTest(passed: true)
                }
                let report = String(decoding: result?.standardOutputContent ?? [], as: UTF8.self)
                let (before, during, after, ran) = (
                    measuredFigure("before", in: report), measuredFigure("during", in: report),
                    measuredFigure("after", in: report), measuredFigure("ran", in: report)
                )
                progress(
                    "thread executors: \(before ?? -1) threads before, \(during ?? -1) with 20 executors, "
                        + "\(after ?? -1) after shutdown")
                #expect(ran == 20, "every body ran")
                if let before, let during, let after {
                    #expect(during >= before + 20, "each executor has a thread")
                    #expect(after <= before, "no thread is left once every executor has shut down")
                } else {
                    Issue.record("the child did not report its thread counts: \(report)")
                }
            }
        #endif

        @Test func handlersAndTheirCapturesAreReleasedOnEveryKindOfExecutor() {
            let thread = ThreadExecutor(name: "releases captures")
            let runLoop = ThreadExecutor(name: "hosts a run loop")
            let hosted = Deferred<RunLoopExecutor>()
            runLoop.submit { hosted.fill(with: .current()) }
            guard let runLoopExecutor = hosted.wait(until: .now() + 10) else {
                Issue.record("the run loop thread did not start")
                return
            }
            let operations = OperationQueue()
            let executors: [(String, any Executor)] = [
                ("immediate", ImmediateExecutor.immediate),
                ("serial queue", DispatchQueue(label: "releases captures")),
                ("concurrent queue", DispatchQueue.global()),
                ("operation queue", operations),
                ("thread executor", thread),
                ("run loop executor", runLoopExecutor),
            ]
            for (name, executor) in executors {
                let live = LiveCount()
                let ran = Counter()
                let finished = DispatchGroup()
                do {
                    let source = Deferred<Int>()
                    let tracked = LifetimeTracked(live)
                    let derived: [Future<Int>] = [
                        source.map(upon: executor) { value in
                            _ = tracked
                            return value
                        },
                        source.andThen(upon: executor) { value in
                            _ = tracked
                            return Future(filledWith: value)
                        },
                        source.lazy.map { value in
                            _ = tracked
                            return value
                        }.eraseToFuture(),
                    ]
                    for future in derived + [Future(source)] {
                        finished.enter()
                        future.upon(executor) { _ in
                            _ = tracked
                            ran.increment()
                            finished.leave()
                        }
                    }
                    source.fill(with: 1)
                }
                #expect(finished.wait(timeout: .now() + 10) == .success, "handlers on \(name) ran")
                #expect(ran.value == 4)
                // The last release may happen just after the handler returns, on the executor's thread.
                for _ in 0..<500 where live.value != 0 {
                    Thread.sleep(forTimeInterval: 0.002)
                }
                #expect(live.value == 0, "captures of handlers that ran on \(name) are released")
            }
            #expect(thread.shutdown().wait(until: .now() + 10) != nil)
            #expect(runLoop.shutdown().wait(until: .now() + 10) != nil)
        }
    }
}

/// How much resident memory grows over `cycles(count)`, measured after `cycles(warmUp)` has
/// warmed the allocator up.
private func residentGrowth(warmUp: Int, count: Int, _ cycles: (Int) -> Void) -> Int {
    cycles(warmUp)
    let before = residentMemory() ?? 0
    cycles(count)
    return (residentMemory() ?? 0) - before
}

/// How far resident memory may grow over the cycles of a memory test: 4 MB.
///
/// The smallest leak, one 32-byte heap block a cycle, grows it by 6.4 MB over the 200,000 quick
/// cycles (and the tests' own objects by far more). Measured growth is about 0.1 to 0.3 MB.
private let residentGrowthLimit = 4_000_000

/// Reports the growth a memory test's child measured over the test size's cycles, and fails the
/// test if it is missing or not below ``residentGrowthLimit``.
private func expectFlat(_ growth: Int?, over cycles: String, sourceLocation: SourceLocation = #_sourceLocation) {
    let count = TestSize.current.memoryCycles
    progress("\(cycles): resident memory grew by \(growth ?? -1) bytes over \(count) cycles")
    #expect(
        growth.map { $0 < residentGrowthLimit } == true,
        "grew by \(growth ?? -1) bytes over \(count) cycles; the limit is \(residentGrowthLimit)",
        sourceLocation: sourceLocation)
}

/// How many threads this process has, where the platform reports it (Linux), and not under a
/// sanitizer: like the memory measurements, the thread count is measured in the default and
/// release runs. (Under ThreadSanitizer, started while the parent ran deep chains, the child
/// once exited with status 1 before printing anything.)
private func threadCount() -> Int? {
    guard !TestSize.underSanitizer else {
        return nil
    }
    #if os(Linux)  // /proc/self/task is Linux's; elsewhere the thread-count test is skipped
        return try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count
    #else
        return nil
    #endif
}
