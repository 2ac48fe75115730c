import Deferred
import DeferredExecutors
import Foundation
import TestSupport
import Testing

/// What a ThreadExecutor or a LoopExecutor leaves behind when it stops: nothing it was given, and no identity a
/// later thread could share.
@Suite struct ThreadExecutorLifecycleTests {
    @Test(arguments: OwnedThreadKind.allCases) func delayedBodiesNotYetDueAreReleasedByShutdown(_ kind: OwnedThreadKind)
    {
        let executor = kind.make(name: "delays")
        let live = LiveCount()
        let ran = Counter()
        for _ in 0..<50 {
            let tracked = LifetimeTracked(live)
            executor.submit(after: .seconds(3600)) {
                _ = tracked
                ran.increment()
            }
        }
        #expect(live.value == 50)
        let exited = executor.shutdown()
        #expect(live.value == 0, "shutdown released every delayed body")
        #expect(exited.value() != nil)
        #expect(ran.value == 0)
    }

    @Test(arguments: OwnedThreadKind.allCases) func delayedBodiesRunInOrderOfDeadlineThenSubmission(
        _ kind: OwnedThreadKind
    ) {
        let executor = kind.make(name: "delay order")
        defer { executor.shutdown() }
        let recorder = OrderRecorder(count: 4)
        let done = Deferred<Void>()
        executor.submit(after: .milliseconds(30)) {
            recorder.record(3)
            done.fill()
        }
        executor.submit(after: .milliseconds(10)) { recorder.record(0) }
        executor.submit(after: .milliseconds(20)) { recorder.record(1) }
        executor.submit(after: .milliseconds(20)) { recorder.record(2) }
        #expect(done.value() != nil)
        #expect(recorder.order == [0, 1, 2, 3])
    }

    /// The system reuses a finished thread's identifier for new threads; an identity based on it
    /// alone made `isCurrent` and `isIsolatingCurrentContext()` true on unrelated threads.
    @Test(arguments: OwnedThreadKind.allCases) func noLaterThreadPassesForTheExecutorsThread(_ kind: OwnedThreadKind) {
        let executor = kind.make(name: "finished")
        let onItsThread = Deferred<Bool>()
        executor.submit { onItsThread.fill(with: executor.isCurrent) }
        #expect(onItsThread.value() == true)
        #expect(executor.shutdown().value() != nil)
        let mistaken = Counter()
        for _ in 0..<200 {
            let checked = Deferred<Void>()
            let thread = Thread {
                if executor.isCurrent || (executor as? ThreadExecutor)?.isIsolatingCurrentContext() == true {
                    mistaken.increment()
                }
                checked.fill()
            }
            thread.start()
            _ = checked.value()
        }
        #expect(mistaken.value == 0, "\(mistaken.value) of 200 later threads passed for the executor's thread")
    }

    @Test(arguments: OwnedThreadKind.allCases)
    func theThreadExitsAndReleasesEverythingWhenTheExecutorIsReleasedWithWorkQueued(_ kind: OwnedThreadKind) {
        let live = LiveCount()
        let ran = Counter()
        let exited: Future<Void>
        do {
            let executor = kind.make(name: "released")
            let gate = Deferred<Void>()
            executor.submit { _ = gate.value() }
            for _ in 0..<10 {
                let tracked = LifetimeTracked(live)
                executor.submit {
                    _ = tracked
                    ran.increment()
                }
                executor.submit(after: .seconds(3600)) { _ = tracked }
            }
            exited = executor.shutdown()
            gate.fill()
        }
        #expect(exited.value() != nil)
        #expect(ran.value == 10, "bodies queued before the shutdown ran")
        #expect(live.value == 0)
    }

    /// The last bodies ran in a run loop nested in a body, whose run the shutdown stopped; the
    /// thread's own run then waited forever and the executor never exited.
    @Test func theThreadExitsWhenShutdownComesWhileABodyRunsANestedRunLoop() {
        var stuck = 0
        for round in 0..<20 {
            let executor = ThreadExecutor(name: "nested")
            let nested = Deferred<Void>()
            executor.submit {
                if round.isMultiple(of: 2) {
                    executor.shutdown()  // from the body itself
                }
                nested.fill()
                RunLoop.current.run(until: Date(timeIntervalSinceNow: 0.02))
            }
            _ = nested.value()
            if executor.shutdown().value(within: 5) == nil {
                stuck += 1
            }
        }
        #expect(stuck == 0, "\(stuck) of 20 threads never exited")
    }

    /// A drain nested in a body took the newer bodies before the older ones the outer drain
    /// still held.
    @Test func aRunLoopNestedInABodyKeepsSubmissionOrder() {
        let executor = ThreadExecutor(name: "nested order")
        let recorder = OrderRecorder(count: 4)
        let queued = Deferred<Void>()
        let nested = Deferred<Void>()
        let done = Deferred<Void>()
        executor.submit {
            _ = queued.value()
            recorder.record(0)
            nested.fill()
            RunLoop.current.run(until: Date(timeIntervalSinceNow: 0.05))
        }
        executor.submit { recorder.record(1) }
        executor.submit { recorder.record(2) }
        queued.fill()
        _ = nested.value()
        executor.submit {
            recorder.record(3)
            done.fill()
        }
        #expect(done.value() != nil)
        #expect(recorder.order == [0, 1, 2, 3])
        #expect(executor.shutdown().value() != nil)
    }

    #if EXIT_TESTS  // a test in a child process; see testSwiftSettings in Package.swift
        /// A job racing shutdown either runs or stops the program with a message naming the
        /// executor; never is it dropped, leaving its task suspended forever.
        ///
        /// Checking "shut down?" and then queueing were two steps, and a job could slip between
        /// them. Now the queueing itself refuses, and a refusal traps.
        @Test func aJobRacingShutdownRunsOrStopsTheProgramNamingTheExecutor() async {
            let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
                for round in 0..<10_000 {
                    let executor = ThreadExecutor(name: "racing \(round)")
                    let finished = Deferred<Void>()
                    let watchdog = DispatchWorkItem {
                        FileHandle.standardError.write(Data("round \(round): the job was lost\n".utf8))
                        endExitTest(passed: true)
                    }
                    DispatchQueue.global().asyncAfter(deadline: .now() + 30, execute: watchdog)
                    Thread { executor.shutdown() }.start()
                    Task(executorPreference: executor) { finished.fill() }
                    await finished.value
                    watchdog.cancel()
                    FileHandle.standardError.write(Data("ran\n".utf8))
                }
                FileHandle.standardError.write(Data("no round refused the job\n".utf8))
                endExitTest(passed: true)
            }
            let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
            let ran = message.split(separator: "\n").count { $0 == "ran" }
            progress("race enqueue against shutdown: \(ran) jobs ran, then one was refused and stopped the program")
            #expect(message.contains("a job was enqueued on ThreadExecutor \"racing"))
            #expect(message.contains("after shutdown()"))
            #expect(!message.contains("was lost"))
        }
    #endif
}
