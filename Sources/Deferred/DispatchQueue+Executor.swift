public import Dispatch

extension DispatchQueue: SchedulingExecutor {
    /// Runs `body` asynchronously on this queue, like `async(execute:)`.
    ///
    /// On a serial queue, bodies submitted from one thread run one at a time in order.
    public func submit(_ body: @escaping @Sendable () -> Void) {
        async(execute: body)
    }

    /// Runs `body` on this queue once `delay` has passed, like `asyncAfter(deadline:execute:)`.
    ///
    /// - Parameters:
    ///   - delay: How long to wait first, measured on the uptime clock.
    ///   - body: The work to run.
    public func submit(after delay: Duration, _ body: @escaping @Sendable () -> Void) {
        asyncAfter(deadline: .now() + .nanoseconds(delay.clampedNanoseconds), execute: body)
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
