import DeferredExecutors
import Dispatch
import Foundation

func runMainThreadScenario() {
    let clock = Clock()
    // Work happens elsewhere; its results are delivered to the main thread, either through the
    // main Dispatch queue or the main run loop. On Linux both run while the main thread runs its
    // run loop, which `RunLoop.main.run(untilFilled:)` does until a future is filled.
    let answer = Future(upon: .global()) { 6 * 7 }
    let viaQueue = answer.map(upon: .main) { value in
        (value, Thread.isMainThread)
    }
    let viaRunLoop = answer.map(upon: RunLoopExecutor.main) { value in
        (value, Thread.isMainThread)
    }
    let (queued, ranOnMainFromQueue) = RunLoop.main.run(untilFilled: viaQueue)
    let (looped, ranOnMainFromRunLoop) = RunLoop.main.run(untilFilled: viaRunLoop)
    clock.log("upon(.main) delivered \(queued) on the main thread: \(ranOnMainFromQueue)")
    clock.log("upon(RunLoopExecutor.main) delivered \(looped) on the main thread: \(ranOnMainFromRunLoop)")
    guard ranOnMainFromQueue && ranOnMainFromRunLoop else {
        print("deferred-demo: a main-thread callback ran on another thread")
        exit(1)
    }
}
