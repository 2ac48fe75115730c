public import Dispatch

extension DispatchQueue: Executor {
    /// Runs `body` asynchronously on this queue, like `async(execute:)`.
    ///
    /// On a serial queue, bodies submitted from one thread run one at a time in order.
    public func submit(_ body: @escaping @Sendable () -> Void) {
        async(execute: body)
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
