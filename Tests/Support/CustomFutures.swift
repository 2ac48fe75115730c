public import Deferred
public import Dispatch

/// A future written outside the library, the way a user would write one: it reads through
/// to a deferred and counts the handlers it is given.
public struct CountingFuture<Value: Sendable>: FutureProtocol {
    /// The deferred whose value this future delivers.
    public let base: Deferred<Value>
    /// Counts the handlers added.
    public let handlers = Counter()

    /// Creates a future that reads through to `base`.
    public init(base: Deferred<Value>) {
        self.base = base
    }

    /// Counts the handler and adds it to `base`.
    public func upon(_ executor: some Executor, execute body: @escaping @Sendable (Value) -> Void) {
        handlers.increment()
        base.upon(executor, execute: body)
    }

    /// The value of `base`, if any.
    public func peek() -> Value? {
        base.peek()
    }
}

/// An executor that counts its bodies and runs them on a private serial queue.
public final class CountingExecutor: Executor {
    /// The queue that runs the bodies.
    public let queue = DispatchQueue(label: "counting-executor")
    /// Counts the bodies submitted.
    public let submitted = Counter()

    /// Creates an executor with its own queue.
    public init() {}

    /// Counts `body` and runs it on ``queue``.
    public func submit(_ body: @escaping @Sendable () -> Void) {
        submitted.increment()
        queue.async(execute: body)
    }
}
