public import Deferred

/// An executor that owns one thread, runs every body on it one at a time in the order
/// submitted, and keeps its own timers: one loop of a ``LoopGroup``, the server configuration.
///
/// Its thread runs nothing but this executor's work. Submitting a body is a push onto a
/// lock-free stack, with a wake-up only when the thread waits; `submit(after:)` keeps the body
/// in the loop's own timer heap, so a time limit on a loop (`timeout(after:upon:)`) needs no
/// Dispatch timer and no hop through a queue. A limit that its attempt beats is withdrawn from
/// the heap: the loop does not wake for it, and long limits do not pile up. A service pins each request to one loop of a group
/// (``LoopGroup/next()``): its stages, callbacks and time limits then run on one thread.
///
/// ```swift
/// let loops = LoopGroup()
/// let loop = loops.next()
/// backend.fetch(key)
///     .timeout(after: .milliseconds(200), upon: loop)
///     .upon(loop) { reply in respond(reply) }
/// ```
///
/// Unlike ``ThreadExecutor``, there is no run loop: `Timer` and other run-loop based APIs do not
/// fire inside its bodies. ``shutdown()`` (or releasing the executor) stops the thread once the
/// bodies already submitted and the delayed bodies already due have run; delayed bodies not yet
/// due are released without running, and a body submitted after that is released at once
/// (``isShutDown`` tells that this happened).
public final class LoopExecutor: SchedulingExecutor {
    /// The name of the executor and its thread, for debuggers and logs.
    public let name: String

    private let thread: LoopThread

    /// Starts a thread named `name` and returns once it is ready to run bodies.
    ///
    /// - Parameter name: The name of the executor and of its thread.
    public init(name: String = "LoopExecutor") {
        self.name = name
        thread = LoopThread(name: name)
    }

    deinit {
        thread.shutdown()
    }

    /// Runs `body` on this executor's thread after the bodies submitted before it.
    ///
    /// After ``shutdown()``, `body` is released without running.
    public func submit(_ body: @escaping @Sendable () -> Void) {
        _ = thread.accept(body)
    }

    /// Runs `body` on this executor's thread once `delay` has passed.
    ///
    /// - Parameters:
    ///   - delay: How long to wait first.
    ///   - body: The work to run; released without running if the executor shuts down first.
    public func submit(after delay: Duration, _ body: @escaping @Sendable () -> Void) {
        thread.accept(after: delay, .body(body))
    }

    /// How many delayed bodies and limits' timers wait in this loop's heap, counting withdrawn
    /// timers not yet dropped; for tests.
    internal var delayedCount: Int {
        thread.delayedCount
    }

    /// Whether ``shutdown()`` has been called (directly, or by releasing the executor).
    public var isShutDown: Bool {
        thread.isShutDown
    }

    /// Whether the calling thread is this executor's thread.
    public var isCurrent: Bool {
        thread.isCurrentThread
    }

    /// Stops the thread once the bodies already submitted, and the delayed bodies already due,
    /// have run; releases the delayed bodies not yet due.
    ///
    /// Calling it again does nothing more; every call returns a future of the same end.
    ///
    /// - Returns: A future filled once the thread has finished.
    @discardableResult
    public func shutdown() -> Future<Void> {
        thread.shutdown()
    }
}

extension LoopExecutor: TimerScheduling {
    /// Keeps a time limit's timer in this loop's heap, where its attempt withdraws it if it
    /// finishes first; runs it on the thread once `delay` has passed.
    @usableFromInline
    package func schedule(_ timer: DispatchTimer, after delay: Duration) {
        thread.accept(after: delay, .timer(timer))
    }
}
