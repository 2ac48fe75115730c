public import Dispatch

/// Every Dispatch queue is an executor: `upon(.main)`, `upon(.global())` or any queue you made.
///
/// A body submitted to a queue runs asynchronously, like a block passed to `async(execute:)`,
/// and the queue can also run it after a delay, so delays and timeouts work on queues.
///
/// ```swift
/// let thumbnails = DispatchQueue(label: "thumbnails")
/// let pixels = Future(upon: thumbnails) { 64 * 64 }
/// pixels.upon(.main) { print("\($0) pixels") }
/// ```
extension DispatchQueue: SchedulingExecutor {
    /// Runs `body` asynchronously on this queue, like `async(execute:)`.
    ///
    /// On a serial queue, bodies submitted from one thread run one at a time in order.
    public func submit(_ body: @escaping @Sendable () -> Void) {
        async(execute: body)
    }

    /// Runs `body` on this queue once `delay` has passed, like `asyncAfter(deadline:execute:)`.
    ///
    /// The delays of every queue wait in one heap, served by a single Dispatch timer, rather than a
    /// timer source each as `asyncAfter` makes: scheduling costs one small allocation and, unless
    /// the new deadline is the earliest, no system call. The body runs as soon after its deadline
    /// as a wake-up can, as with `asyncAfter`: the timer is armed for the earliest deadline
    /// exactly, and a wake-up hands over every body due by then, in deadline order.
    ///
    /// - Parameters:
    ///   - delay: How long to wait first, measured on the uptime clock; zero or negative runs
    ///     `body` as `submit(_:)` does.
    ///   - body: The work to run.
    public func submit(after delay: Duration, _ body: @escaping @Sendable () -> Void) {
        let nanoseconds = delay.clampedNanoseconds
        guard nanoseconds > 0 else {
            async(execute: body)
            return
        }
        DispatchTimers.shared.schedule(on: self, after: nanoseconds, body)
    }
}

extension Executor where Self == DispatchQueue {
    /// The main Dispatch queue: `future.upon(.main) { ... }` updates the user interface.
    ///
    /// On Linux the main queue runs only while the main thread is inside `dispatchMain()` or
    /// the main run loop.
    @inlinable
    public static var main: DispatchQueue { DispatchQueue.main }

    /// A global concurrent Dispatch queue: `future.upon(.global()) { ... }`.
    ///
    /// - Parameter qos: The quality of service of the queue.
    /// - Returns: The global queue for `qos`.
    @inlinable
    public static func global(qos: DispatchQoS.QoSClass = .default) -> DispatchQueue {
        DispatchQueue.global(qos: qos)
    }
}

extension DispatchQueue: SerialExecutorIdentity {
    /// Whether this is the main queue and the caller is one of its bodies.
    ///
    /// Only the main queue is known to be serial; for any other queue this is `false`.
    package var isBlockedByCaller: Bool {
        // `DispatchQueue.main` may return a new wrapper object on each call, so the main queue is
        // recognised by its mark rather than by identity.
        getSpecific(key: mainQueueKey) == true && DispatchQueue.getSpecific(key: mainQueueKey) == true
    }
}

extension DispatchQueue {
    /// Whether the caller is a body of the main queue (the main actor's, on every platform).
    internal static var isRunningMainQueue: Bool {
        getSpecific(key: mainQueueKey) == true
    }
}

/// A key that marks the main queue, so that code can ask whether it runs there without trapping.
private let mainQueueKey: DispatchSpecificKey<Bool> = {
    let key = DispatchSpecificKey<Bool>()
    DispatchQueue.main.setSpecific(key: key, value: true)
    return key
}()
