import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import Testing

/// What every executor promises, checked on one executor under test.
///
/// Every executor runs each body it accepts exactly once and releases it after it runs; a
/// serial one runs the bodies submitted from one thread in that order; a scheduling one runs a
/// delayed body once, after its delay; one that can be stopped never runs a body submitted
/// after the stop and releases it at once. The tests in DeferredExecutorsTests run each check
/// over every ``ExecutorKind``.
public enum ExecutorConformance {
    /// Bodies submitted from four threads at once each run exactly once, and never again.
    public static func checkExactlyOnce(_ under: ExecutorUnderTest, bodies: Int = 1_000) {
        let runs = (0..<bodies).map { _ in Counter() }
        DispatchQueue.concurrentPerform(iterations: 4) { part in
            for index in stride(from: part, to: bodies, by: 4) {
                under.executor.submit { runs[index].increment() }
            }
        }
        let allRan = under.settle { runs.allSatisfy { $0.value >= 1 } }
        under.idle()
        #expect(allRan, "every body ran")
        #expect(runs.allSatisfy { $0.value <= 1 }, "no body ran twice")
    }

    /// Bodies submitted from one thread run in the order submitted.
    public static func checkOrder(_ under: ExecutorUnderTest, bodies: Int = 1_000) {
        let recorder = OrderRecorder(count: bodies)
        let ran = Counter()
        for index in 0..<bodies {
            under.executor.submit {
                recorder.record(index)
                ran.increment()
            }
        }
        #expect(under.settle { ran.value == bodies })
        #expect(recorder.order == Array(0..<bodies))
    }

    /// Each body's captures are released once it has run, while the executor is still in use.
    public static func checkRelease(_ under: ExecutorUnderTest, bodies: Int = 100) {
        let (live, ran) = submitTrackedBodies(bodies, to: under)
        #expect(under.settle { ran.value == bodies })
        #expect(under.settle(within: .seconds(10)) { live.value == 0 }, "\(live.value) bodies still held")
    }

    /// Delayed bodies each run exactly once, as time passes (real or virtual), and are released.
    public static func checkDelayedBodies(_ under: ExecutorUnderTest, bodies: Int = 50) {
        let live = LiveCount()
        let runs = (0..<bodies).map { _ in Counter() }
        for index in 0..<bodies {
            let tracked = LifetimeTracked(live)
            under.scheduling.submit(after: .milliseconds(5)) {
                _ = tracked
                runs[index].increment()
            }
        }
        #expect(under.settleAsTimePasses { runs.allSatisfy { $0.value >= 1 } }, "every delayed body ran")
        under.idle()
        #expect(runs.allSatisfy { $0.value <= 1 }, "no delayed body ran twice")
        #expect(under.settle(within: .seconds(10)) { live.value == 0 })
    }

    /// A body submitted after the stop never runs and is released at once; one accepted before
    /// runs at most once (exactly once where the kind promises it) and is released.
    public static func checkStop(_ stoppable: StoppableExecutor, bodies: Int = 100) {
        let under = stoppable.under
        let (live, ran) = submitTrackedBodies(bodies, to: under)
        stoppable.stop()
        let ranByStop = ran.value
        let lateLive = LiveCount()
        for _ in 0..<10 {
            let tracked = LifetimeTracked(lateLive)
            under.executor.submit { _ = tracked }
            under.scheduling.submit(after: .zero) { _ = tracked }
        }
        #expect(lateLive.value == 0, "bodies submitted after the stop were released at once")
        under.idle()
        #expect(under.settle(within: .seconds(10)) { live.value == 0 }, "bodies accepted before were released")
        if stoppable.runsAcceptedBodies {
            #expect(ran.value == bodies, "every body accepted before the stop ran")
        } else {
            #expect(ran.value == ranByStop, "no body started after the stop returned")
        }
    }

    /// `invalidate()` called from a task that a body of the token started on this executor waits
    /// for the token's body still running elsewhere.
    ///
    /// The task inherits the body's task-local record and may run later on the same thread,
    /// once the body has returned; it must not count itself as that body.
    public static func checkInvalidateFromATaskStartedInABody(_ under: ExecutorUnderTest, rounds: Int = 10) async {
        var returnedEarly = 0
        for _ in 0..<rounds {
            let token = InvalidationToken()
            let otherStarted = Deferred<Void>()
            let otherFinished = Counter()
            token.validating(DispatchQueue(label: "conformance.other body")).submit {
                otherStarted.fill()
                Thread.sleep(forTimeInterval: 0.02)
                otherFinished.increment()
            }
            await otherStarted.value
            let sawOtherRunning = Deferred<Bool>()
            validating(under.executor, by: token).submit {
                let invalidate: @Sendable () async -> Void = {
                    token.invalidate()
                    sawOtherRunning.fill(with: otherFinished.value == 0)
                }
                // On a thread executor, the task runs on the body's own thread once the body has
                // returned (the shape that inherited the body's record); elsewhere on a thread of
                // its own, not in the shared pool, which other tests may keep busy for long under
                // a sanitizer.
                let preferred = (under.executor as? any TaskExecutor) ?? taskThread
                Task(executorPreference: preferred) { await invalidate() }
            }
            #expect(await under.settleSuspending(within: .seconds(30)) { sawOtherRunning.isFilled })
            returnedEarly += sawOtherRunning.peek() == true ? 1 : 0
        }
        #expect(returnedEarly == 0, "invalidate() returned while another body of the token ran")
    }

    /// Where the tasks of ``checkInvalidateFromATaskStartedInABody(_:rounds:)`` run when the
    /// executor under test cannot run them.
    private static let taskThread = ThreadExecutor(name: "conformance.tasks")

    /// `base` behind `token`.
    private static func validating(_ base: some Executor, by token: InvalidationToken) -> any Executor {
        token.validating(base)
    }

    /// A delayed body that is due when the executor stops runs if the kind runs what it accepted
    /// (a thread's shutdown) and never otherwise (an invalidated token); it is released either
    /// way.
    public static func checkStopWithADelayedBodyDue(_ stoppable: StoppableExecutor) {
        let under = stoppable.under
        let live = LiveCount()
        let ran = Counter()
        let blocking = Deferred<Void>()
        let due = Deferred<Void>()
        // Keeps the executor busy until the stop has taken effect, so that the delayed body falls
        // due before the stop and cannot run before it.
        under.executor.submit {
            blocking.fill()
            _ = due.wait(until: .now() + 30)
            while !stoppable.isStopped() {
                Thread.sleep(forTimeInterval: 0.000_2)
            }
        }
        _ = blocking.wait(until: .now() + 30)
        do {
            let tracked = LifetimeTracked(live)
            under.scheduling.submit(after: .milliseconds(1)) {
                _ = tracked
                ran.increment()
            }
        }
        Thread.sleep(forTimeInterval: 0.02)
        due.fill()
        let stopped = Deferred<Void>()
        Thread {
            stoppable.stop()
            stopped.fill()
        }.start()
        #expect(stopped.wait(until: .now() + 30) != nil, "the stop returned")
        under.idle()
        if stoppable.runsAcceptedBodies {
            #expect(ran.value == 1, "the delayed body due at the stop ran once")
        } else {
            #expect(ran.value == 0, "the delayed body did not run after the stop")
        }
        #expect(under.settle(within: .seconds(10)) { live.value == 0 }, "the delayed body was released")
    }

    /// A stop that comes while a delayed body runs the run loop of its thread (waiting for a
    /// `Timer`, say) completes once the body returns.
    public static func checkStopWhileADelayedBodyRunsTheRunLoop(_ stoppable: StoppableExecutor) {
        let under = stoppable.under
        let running = Deferred<Void>()
        under.scheduling.submit(after: .milliseconds(1)) {
            running.fill()
            RunLoop.current.run(until: Date(timeIntervalSinceNow: 0.1))
        }
        #expect(running.wait(until: .now() + 30) != nil)
        let stopped = Deferred<Void>()
        Thread {
            stoppable.stop()
            stopped.fill()
        }.start()
        #expect(stopped.wait(until: .now() + 10) != nil, "the stop completed once the body returned")
    }

    /// Submits `count` bodies that each count their run and capture a tracked object; returns
    /// the live count of those objects and the run counter.
    private static func submitTrackedBodies(_ count: Int, to under: ExecutorUnderTest) -> (LiveCount, Counter) {
        let live = LiveCount()
        let ran = Counter()
        for _ in 0..<count {
            let tracked = LifetimeTracked(live)
            under.executor.submit {
                _ = tracked
                ran.increment()
            }
        }
        return (live, ran)
    }
}
