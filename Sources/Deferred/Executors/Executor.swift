/// A place where callbacks run: a Dispatch queue, a run loop, a thread, or your own loop.
///
/// Every Deferred API that calls your code takes an executor, so where a callback runs is
/// never a guess. An executor accepts a body and runs it once, later or at once, in its own
/// context. It does not have to be serial; when it is, bodies submitted from one thread start
/// in the order they were submitted.
///
/// Executors are reference types because they name a place with an identity (a queue, a loop,
/// a thread). Making your own loop an executor takes one method:
///
/// ```swift
/// final class RenderLoop: Executor {
///     private let queue = DispatchQueue(label: "render")
///     func submit(_ body: @escaping @Sendable () -> Void) { queue.async(execute: body) }
/// }
/// ```
///
/// The library provides `DispatchQueue` and ``ImmediateExecutor``; the `DeferredExecutors`
/// module adds `OperationQueue`, run loops, a dedicated thread, and test executors.
public protocol Executor: AnyObject, Sendable {
    /// Arranges for `body` to run once in this executor's context.
    ///
    /// - Parameter body: The work to run. Deferred submits every callback exactly once and
    ///   never waits for it; an executor that cannot run a body must document what it does
    ///   with it.
    func submit(_ body: @escaping @Sendable () -> Void)
}

extension Executor where Self == ImmediateExecutor {
    /// An executor that runs each body at once, in the caller's context.
    ///
    /// Write `future.upon(.immediate) { ... }` to handle a value on whichever thread delivers it.
    @inlinable
    public static var immediate: ImmediateExecutor { ImmediateExecutor.shared }
}

extension Executor {
    /// Whether this executor is the ``ImmediateExecutor``, whose bodies the library runs in
    /// place instead of submitting them.
    ///
    /// Decided at compile time wherever the executor's type is known.
    @inlinable
    internal var runsInPlace: Bool {
        Self.self == ImmediateExecutor.self
    }
}

extension Executor {
    /// Calls `body` with `value` in this executor's context: in place on the immediate
    /// executor, submitted anywhere else.
    @inlinable
    internal func run<Value: Sendable>(_ body: @escaping @Sendable (Value) -> Void, with value: Value) {
        if runsInPlace {
            body(value)
        } else {
            submit { body(value) }
        }
    }
}
