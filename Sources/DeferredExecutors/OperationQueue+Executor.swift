import Deferred
public import Foundation

/// Every operation queue is an executor: each body becomes one operation of the queue.
extension OperationQueue: Executor {
    /// Adds `body` to this queue as an operation.
    ///
    /// Each body is an operation of its own, so the queue's width
    /// (`maxConcurrentOperationCount`), suspension (`isSuspended`) and barriers
    /// (`addBarrierBlock(_:)`) apply to it like to any other operation:
    ///
    /// ```swift
    /// let imports = OperationQueue()
    /// imports.maxConcurrentOperationCount = 2
    /// files.map(load).allFilled().upon(imports) { save($0) }
    /// ```
    public func submit(_ body: @escaping @Sendable () -> Void) {
        addOperation(body)
    }
}
