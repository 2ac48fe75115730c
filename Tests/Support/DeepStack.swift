import Dispatch
import Foundation

/// Runs `body` on a thread of its own with an 8 MiB stack, the size a program's threads
/// usually get, and returns its result; prints how long it took.
///
/// The million-deep stack-safety tests use it for three reasons:
/// - The stack is known: a recursive implementation overflows it, whatever thread pool the
///   test runner happens to use.
/// - They do not hold the test runner's threads. Swift Testing runs synchronous tests on the
///   cooperative pool, which has one thread per core; a few long synchronous tests there would
///   keep every other test waiting, and a new user would watch a minute of silence.
/// - Only as many run at once as there are cores, each printing a line when it ends, so the
///   log shows progress while they run.
///
/// Record expectations after it returns, in the test itself: `#expect` on another thread has
/// no test to report to.
///
/// - Parameters:
///   - name: What runs, for the log.
///   - body: The work; it may build and drop structures a million deep.
/// - Returns: What `body` returned.
public func onDeepStack<Result: Sendable>(
    _ name: String,
    _ body: @escaping @Sendable () -> Result
) async -> Result {
    await withCheckedContinuation { continuation in
        let thread = Thread {
            deepStackLanes.wait()
            let started = ContinuousClock.now
            let result = body()
            let (seconds, attoseconds) = (ContinuousClock.now - started).components
            deepStackLanes.signal()
            let elapsed = Double(seconds) + Double(attoseconds) / 1e18
            print("deep: \(name), depth \(Stress.depth): \(String(format: "%.1f", elapsed)) s")
            continuation.resume(returning: result)
        }
        thread.stackSize = deepStackSize
        thread.start()
    }
}

/// The stack of each deep run: 8 MiB.
private let deepStackSize = 8 << 20

/// How many deep runs may run at once: one per core.
private let deepStackLanes = DispatchSemaphore(value: max(1, ProcessInfo.processInfo.activeProcessorCount))
