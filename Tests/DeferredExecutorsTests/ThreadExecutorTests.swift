import DeferredExecutors
import Foundation
import TestSupport
import Testing

@Suite struct ThreadExecutorTests {
    @Test(arguments: OwnedThreadKind.allCases) func everyBodyRunsOnTheExecutorsOneThreadInOrder(_ kind: OwnedThreadKind)
    {
        let executor = kind.make(name: "ordered")
        defer { executor.shutdown() }
        let recorder = OrderRecorder(count: 500)
        let firstThread = Deferred<ObjectIdentifier>()
        let elsewhere = Counter()
        let done = Deferred<Void>()
        for index in 0..<500 {
            executor.submit {
                recorder.record(index)
                let thread = currentThreadID()
                if !firstThread.fill(with: thread), firstThread.peek() != thread {
                    elsewhere.increment()
                }
                if index == 499 {
                    done.fill()
                }
            }
        }
        _ = done.value()
        #expect(recorder.order == Array(0..<500))
        #expect(elsewhere.value == 0, "every body ran on the same thread")
        #expect(firstThread.peek() != currentThreadID())
    }

    @Test(arguments: OwnedThreadKind.allCases) func itAndItsThreadHaveTheNameItWasGiven(_ kind: OwnedThreadKind) {
        let executor = kind.make(name: "render")
        defer { executor.shutdown() }
        #expect(executor.name == "render")
        let threadName = Deferred<String>()
        executor.submit { threadName.fill(with: currentThreadName()) }
        #expect(threadName.value() == "render", "debuggers and logs show the name")
    }

    @Test(arguments: OwnedThreadKind.allCases) func bodiesSubmittedFromManyThreadsEachRunOnce(_ kind: OwnedThreadKind) {
        let executor = kind.make()
        defer { executor.shutdown() }
        let ran = Counter()
        DispatchQueue.concurrentPerform(iterations: 1_000) { _ in
            executor.submit { ran.increment() }
        }
        _ = executor.shutdown().value()
        #expect(ran.value == 1_000)
    }

    @Test(arguments: OwnedThreadKind.allCases) func aBodyMaySubmitMoreWork(_ kind: OwnedThreadKind) {
        let executor = kind.make()
        defer { executor.shutdown() }
        let order = OrderRecorder(count: 3)
        let done = Deferred<Void>()
        executor.submit {
            order.record(0)
            executor.submit {
                order.record(2)
                done.fill()
            }
            order.record(1)
        }
        _ = done.value()
        #expect(order.order == [0, 1, 2])
    }

    @Test(arguments: OwnedThreadKind.allCases) func shutdownRunsTheWorkAlreadySubmittedThenStopsTheThread(
        _ kind: OwnedThreadKind
    ) {
        let executor = kind.make()
        let ran = Counter()
        for _ in 0..<100 {
            executor.submit {
                Thread.sleep(forTimeInterval: 0.0001)
                ran.increment()
            }
        }
        let exited = executor.shutdown()
        #expect(executor.isShutDown)
        #expect(exited.value() != nil, "the thread exits")
        #expect(ran.value == 100, "work submitted before the shutdown ran")
        #expect(executor.shutdown().isFilled, "shutting down again is harmless")
    }

    @Test(arguments: OwnedThreadKind.allCases) func workSubmittedAfterShutdownIsReleasedWithoutRunning(
        _ kind: OwnedThreadKind
    ) {
        let executor = kind.make()
        _ = executor.shutdown().value()
        let live = LiveCount()
        let ran = Counter()
        do {
            let tracked = LifetimeTracked(live)
            executor.submit {
                _ = tracked
                ran.increment()
            }
            executor.submit(after: .zero) {
                _ = tracked
                ran.increment()
            }
        }
        #expect(live.value == 0, "the body was released at once")
        #expect(ran.value == 0)
    }

    @Test(arguments: OwnedThreadKind.allCases) func releasingTheExecutorStopsItsThread(_ kind: OwnedThreadKind) {
        let live = LiveCount()
        do {
            let executor = kind.make()
            let stored = Deferred<Void>()
            executor.submit {
                // Thread-local storage lives exactly as long as the thread.
                Thread.current.threadDictionary["tracked"] = LifetimeTracked(live)
                stored.fill()
            }
            _ = stored.value()
            #expect(live.value == 1)
        }
        for _ in 0..<500 where live.value != 0 {
            Thread.sleep(forTimeInterval: 0.01)
        }
        #expect(live.value == 0, "the thread exited")
    }

    @Test(arguments: OwnedThreadKind.allCases) func delayedWorkRunsAfterItsDelayOnTheExecutorsThread(
        _ kind: OwnedThreadKind
    ) {
        let executor = kind.make()
        defer { executor.shutdown() }
        let thread = Deferred<ObjectIdentifier>()
        executor.submit { thread.fill(with: currentThreadID()) }
        let started = DispatchTime.now()
        let ran = Deferred<(UInt64, ObjectIdentifier)>()
        executor.submit(after: .milliseconds(20)) {
            ran.fill(with: (DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds, currentThreadID()))
        }
        let (elapsed, ranOn) = ran.value() ?? (0, currentThreadID())
        #expect(elapsed >= 20_000_000)
        #expect(ranOn == thread.value())
    }

    @Test(arguments: OwnedThreadKind.allCases) func delayedWorkRunsByDeadlineWhateverTheDelaysPrecision(
        _ kind: OwnedThreadKind
    ) {
        let executor = kind.make()
        defer { executor.shutdown() }
        let order = OrderRecorder(count: 6)
        let done = Deferred<Void>()
        // Never due: neither a century away nor the longest delay a `Duration` holds traps or runs.
        executor.submit(after: .seconds(100 * 365 * 86_400)) { order.record(4) }
        executor.submit(after: .seconds(Int64.max)) { order.record(5) }
        // Delays with parts of a nanosecond (the clock counts whole ones) run, by deadline.
        executor.submit(after: .milliseconds(30) + .nanoseconds(0.4)) { order.record(1) }
        executor.submit(after: .milliseconds(30) + .nanoseconds(0.2)) { order.record(2) }
        executor.submit(after: .milliseconds(10)) { order.record(0) }
        executor.submit(after: .milliseconds(30) + .nanoseconds(1.5)) {
            order.record(3)
            done.fill()
        }
        _ = done.value()
        #expect(order.order == [0, 1, 2, 3])
    }

    @Test func runLoopTimersWorkInsideItsBodies() {
        let executor = ThreadExecutor()
        defer { executor.shutdown() }
        let fired = Deferred<Bool>()
        executor.submit {
            let thread = currentThreadID()
            let timer = Timer(timeInterval: 0.01, repeats: false) { _ in
                fired.fill(with: currentThreadID() == thread)
            }
            RunLoop.current.add(timer, forMode: .default)
        }
        #expect(fired.value() == true)
    }

    @Test(arguments: OwnedThreadKind.allCases) func capturesAreReleasedAfterTheBodyRuns(_ kind: OwnedThreadKind) {
        let executor = kind.make()
        defer { executor.shutdown() }
        let live = LiveCount()
        do {
            let tracked = LifetimeTracked(live)
            executor.submit { _ = tracked }
        }
        let done = Deferred<Void>()
        executor.submit { done.fill() }
        _ = done.value()
        #expect(live.value == 0)
    }
}

/// The operating system's name for the calling thread, as debuggers show it.
private func currentThreadName() -> String {
    #if os(Linux)  // Linux keeps the name in /proc; Darwin answers pthread_getname_np
        let name = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
        return name.trimmingCharacters(in: .newlines)
    #else
        var buffer = [CChar](repeating: 0, count: 64)
        pthread_getname_np(pthread_self(), &buffer, buffer.count)
        return String(cString: buffer)
    #endif
}
