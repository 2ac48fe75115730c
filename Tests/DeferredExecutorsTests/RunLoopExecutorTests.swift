import CoreFoundation
import DeferredExecutors
import Foundation
import TestSupport
import Testing

/// A thread that runs its run loop until `stop` is filled, using `RunLoop.run(untilFilled:)`.
private final class RunLoopThread: Sendable {
    let executor: RunLoopExecutor
    let thread: ObjectIdentifier
    let stop: Deferred<Void>
    let finished: Deferred<Void>

    init() {
        let ready = Deferred<(RunLoopExecutor, ObjectIdentifier)>()
        let stop = Deferred<Void>()
        let finished = Deferred<Void>()
        self.stop = stop
        self.finished = finished
        Thread {
            ready.fill(with: (RunLoopExecutor.current(), currentThreadID()))
            RunLoop.current.run(untilFilled: stop)
            finished.fill()
        }.start()
        (executor, thread) = ready.value()!
    }

    func shutDown() {
        stop.fill()
        _ = finished.value()
    }
}

@Suite struct RunLoopExecutorTests {
    @Test func bodiesRunOnTheRunLoopsThreadInOrder() {
        let loop = RunLoopThread()
        defer { loop.shutDown() }
        let recorder = OrderRecorder(count: 100)
        let onLoopThread = Counter()
        let done = Deferred<Void>()
        for index in 0..<100 {
            loop.executor.submit {
                recorder.record(index)
                if currentThreadID() == loop.thread {
                    onLoopThread.increment()
                }
                if index == 99 {
                    done.fill()
                }
            }
        }
        #expect(done.value() != nil)
        #expect(recorder.order == Array(0..<100))
        #expect(onLoopThread.value == 100)
    }

    @Test func handlersReachTheRunLoopFromAnyThread() {
        let loop = RunLoopThread()
        defer { loop.shutDown() }
        let deferred = Deferred<Int>()
        let received = Deferred<Bool>()
        deferred.upon(loop.executor) { _ in received.fill(with: currentThreadID() == loop.thread) }
        DispatchQueue.global().async { deferred.fill(with: 1) }
        #expect(received.value() == true)
    }

    @Test func delayedBodiesRunAfterTheirDelay() {
        let loop = RunLoopThread()
        defer { loop.shutDown() }
        let started = DispatchTime.now()
        let ran = Deferred<UInt64>()
        loop.executor.submit(after: .milliseconds(30)) {
            ran.fill(with: DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds)
        }
        let elapsed = ran.value() ?? 0
        #expect(elapsed >= 30_000_000)
    }

    @Test func anExecutorForACoreFoundationRunLoop() {
        let loop = RunLoopThread()
        defer { loop.shutDown() }
        // A CFRunLoop is not Sendable, so the executor for it is made on its own thread.
        let made = Deferred<RunLoopExecutor>()
        loop.executor.submit { made.fill(with: RunLoopExecutor(CFRunLoopGetCurrent(), inCommonModes: false)) }
        let viaCoreFoundation = made.value()!
        let ran = Deferred<Bool>()
        viaCoreFoundation.submit { ran.fill(with: currentThreadID() == loop.thread) }
        #expect(ran.value() == true)
    }

    @Test func capturesAreReleasedAfterTheBodyRuns() {
        let loop = RunLoopThread()
        defer { loop.shutDown() }
        let live = LiveCount()
        let done = Deferred<Void>()
        do {
            let tracked = LifetimeTracked(live)
            loop.executor.submit { _ = tracked }
        }
        loop.executor.submit { done.fill() }
        _ = done.value()
        #expect(live.value == 0)
    }

    @Test func runUntilReturnsAtOnceForAFilledFuture() {
        let value = Deferred<Int>()
        let result = Deferred<Int>()
        Thread {
            result.fill(with: RunLoop.current.run(untilFilled: Future(filledWith: 7)))
            value.fill(with: 0)
        }.start()
        #expect(result.value() == 7)
    }
}
