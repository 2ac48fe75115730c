import Dispatch
import Foundation

/// Runs `body` on a thread of its own with a stack of ``TestSize/deepStackBytes`` (of `size`,
/// the run's sizes unless a test says otherwise) and returns its result; prints how long it took.
///
/// The stack-safety tests use it for three reasons:
/// - The stack is known: a recursive implementation overflows it, whatever thread pool the
///   test runner happens to use. It is 8 MiB, the size a program's threads usually get, for
///   chains a million deep (`DEFERRED_TEST_SIZE=full`), and 160 KiB for the quick 20,000:
///   about 8 bytes a level either way, while a level of recursion needs at least 16, so a
///   recursion overflows the stack at either size.
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
///   - size: The sizes `body` builds to, whose stack the thread gets.
///   - body: The work; it may build and drop structures a million deep.
/// - Returns: What `body` returned.
public func onDeepStack<Result: Sendable>(
    _ name: String,
    size: TestSize = .current,
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
            progress("deep: \(name), depth \(size.depth): \(String(format: "%.1f", elapsed)) s")
            continuation.resume(returning: result)
        }
        thread.stackSize = size.deepStackBytes
        thread.start()
    }
}

/// How many deep runs may run at once: one per core.
private let deepStackLanes = DispatchSemaphore(value: max(1, ProcessInfo.processInfo.activeProcessorCount))
