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
    ///
    /// Each use makes an instance (all behave the same): where the executor's type is known,
    /// the library never touches it and the optimizer drops it, which costs less than reaching
    /// a shared instance, made lazily, on every call.
    @inlinable
    public static var immediate: ImmediateExecutor { ImmediateExecutor() }
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

/// An executor that runs each body at once, in the context of whoever submits it.
///
/// A handler added with `upon(.immediate)` runs on the thread that fills the future, or, if
/// the future is already filled, inside the call to `upon` itself. Use it for short,
/// thread-safe work such as forwarding a value or updating an atomic counter; use a queue for
/// anything that may block or that touches state confined to one thread.
///
/// The library's own combinators run their immediate steps in a loop rather than by nesting
/// calls, so chains of any length (a million `map(upon: .immediate)` stages, say) fill
/// without growing the stack. A handler that itself fills another future does nest one call
/// deeper for each such hop; prefer `map` and `andThen` for long chains.
///
/// ```swift
/// let doubled = numbers.map(upon: .immediate) { $0 * 2 }
/// doubled.upon(.immediate) { print($0) }
/// ```
public final class ImmediateExecutor: Executor {
    /// The instance behind ``Executor/immediate``.
    @usableFromInline
    internal static let shared = ImmediateExecutor()

    /// Creates an immediate executor.
    ///
    /// All instances behave the same; ``Executor/immediate`` makes one where it is used.
    @inlinable
    public init() {}

    /// Runs `body` now, before returning.
    @inlinable
    public func submit(_ body: @escaping @Sendable () -> Void) {
        body()
    }
}

/// An executor that can also run a body after a delay.
///
/// `delay(by:upon:)` and `timeout(after:upon:substituting:)` are built on it. `DispatchQueue`
/// conforms, and the `DeferredExecutors` module adds a dedicated thread, run loops and a
/// virtual-time executor for tests, on which delays pass only when the test says so.
///
/// ```swift
/// let reply = service.fetch().timeout(after: .seconds(2), upon: DispatchQueue.global(), substituting: .empty)
/// ```
public protocol SchedulingExecutor: Executor {
    /// Arranges for `body` to run once in this executor's context, no sooner than `delay` from
    /// now.
    ///
    /// - Parameters:
    ///   - delay: How long to wait first; zero or negative runs `body` as soon as `submit`
    ///     would.
    ///   - body: The work to run.
    func submit(after delay: Duration, _ body: @escaping @Sendable () -> Void)
}

extension Duration {
    /// This duration in whole nanoseconds, clamped to the range of `Int` and never negative.
    @usableFromInline
    package var clampedNanoseconds: Int {
        guard self > .zero else {
            return 0
        }
        guard self < .seconds(9_223_372_036) else {
            return .max  // `components` traps past 64 bits of seconds.
        }
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else {
            return .max
        }
        let (total, overflowAgain) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
        return overflowAgain ? .max : Int(total)
    }

    /// This duration, at most 2³³ seconds (about 272 years): a delay that never ends in practice,
    /// by which any instant can still be advanced without overflowing.
    @inlinable
    package var clampedForInstants: Duration {
        self < .seconds(Int64(1) << 33) ? self : .seconds(Int64(1) << 33)
    }
}

/// An executor that can tell when the calling code keeps it from running anything else: a
/// serial executor running the caller, or the thread of a thread-bound executor.
///
/// Debug builds use it to catch a blocking wait that can never end with the value: a wait that
/// blocks the very executor on which a `map` must compute that value.
package protocol SerialExecutorIdentity: Executor {
    /// Whether this executor can run nothing else until the calling code returns.
    var isBlockedByCaller: Bool { get }
}
