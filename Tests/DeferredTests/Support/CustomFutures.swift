import Deferred
import Dispatch

/// A future written outside the library, the way a user would write one: it reads through
/// to a deferred and counts the handlers it is given.
struct CountingFuture<Value: Sendable>: FutureProtocol {
    let base: Deferred<Value>
    let handlers = Counter()

    func upon(_ executor: some Executor, execute body: @escaping @Sendable (Value) -> Void) {
        handlers.increment()
        base.upon(executor, execute: body)
    }

    func peek() -> Value? {
        base.peek()
    }
}

/// An executor that counts its bodies and runs them on a private serial queue.
final class CountingExecutor: Executor {
    let queue = DispatchQueue(label: "counting-executor")
    let submitted = Counter()

    func submit(_ body: @escaping @Sendable () -> Void) {
        submitted.increment()
        queue.async(execute: body)
    }
}
