public import CoreFoundation
public import Deferred
public import Foundation

/// An executor that runs bodies on a run loop's next turn: the main thread's, or any thread's
/// that runs its run loop.
///
/// `RunLoop` and `CFRunLoop` are not `Sendable`, so they cannot be executors themselves; this
/// value holds the run loop and submits with Core Foundation's thread-safe perform-block and
/// wake-up calls. Bodies run in submission order, one per turn of the loop, in the loop's
/// common modes by default (so they also run while a user interface tracks input).
///
/// ```swift
/// profile.upon(RunLoopExecutor.main) { show($0) }
/// ```
///
/// On Linux the main run loop also services `DispatchQueue.main`; a command-line tool can run
/// it with ``Foundation/RunLoop/run(untilFilled:)``.
public final class RunLoopExecutor: SchedulingExecutor {
    private let reference: RunLoopReference

    /// The main thread's run loop.
    public static let main = RunLoopExecutor(CFRunLoopGetMain())

    /// Creates an executor for the run loop of the calling thread.
    ///
    /// Bodies run only while that thread runs its run loop.
    ///
    /// - Parameter inCommonModes: Whether bodies run in the common modes (the default) or only
    ///   in the default mode.
    /// - Returns: An executor for the current thread's run loop.
    public static func current(inCommonModes: Bool = true) -> RunLoopExecutor {
        RunLoopExecutor(CFRunLoopGetCurrent(), inCommonModes: inCommonModes)
    }

    /// Creates an executor for a Core Foundation run loop.
    ///
    /// - Parameters:
    ///   - runLoop: The run loop that runs the bodies.
    ///   - inCommonModes: Whether bodies run in the common modes (the default) or only in the
    ///     default mode.
    public init(_ runLoop: CFRunLoop, inCommonModes: Bool = true) {
        reference = RunLoopReference(runLoop: runLoop, inCommonModes: inCommonModes)
    }

    /// Runs `body` on the run loop's next turn.
    public func submit(_ body: @escaping @Sendable () -> Void) {
        reference.perform(body)
    }

    /// Runs `body` on the run loop once `delay` has passed.
    ///
    /// - Parameters:
    ///   - delay: How long to wait first.
    ///   - body: The work to run.
    public func submit(after delay: Duration, _ body: @escaping @Sendable () -> Void) {
        reference.perform(after: delay, body)
    }
}

extension RunLoop {
    /// Runs this run loop until `future` is filled, then returns its value.
    ///
    /// Call it on the run loop's own thread, typically the main thread of a command-line tool,
    /// so that bodies submitted to ``RunLoopExecutor/main`` and `DispatchQueue.main` run while
    /// the tool waits:
    ///
    /// ```swift
    /// let report = RunLoop.main.run(untilFilled: service.report())
    /// ```
    ///
    /// - Parameter future: The future to wait for.
    /// - Returns: The future's value.
    @available(*, noasync, message: "a task must not run a run loop; use 'await future.value'")
    public func run<Waited: FutureProtocol>(untilFilled future: Waited) -> Waited.Value {
        precondition(self === RunLoop.current, "RunLoop.run(untilFilled:) must be called on the run loop's own thread")
        if let value = future.peek() {
            return value
        }
        let loop = RunLoopReference(runLoop: CFRunLoopGetCurrent(), inCommonModes: false)
        future.upon(RunLoopExecutor(loop.runLoop, inCommonModes: false)) { _ in loop.stop() }
        // A timer in the far future keeps the loop waiting, rather than returning at once, when
        // it has nothing else to do; the stop above ends the run when the value arrives.
        let keepAlive = CFRunLoopTimerCreateWithHandler(nil, .greatestFiniteMagnitude, 0, 0, 0) { _ in }
        CFRunLoopAddTimer(loop.runLoop, keepAlive, kCFRunLoopDefaultMode)
        defer { CFRunLoopTimerInvalidate(keepAlive) }
        while true {
            if let value = future.peek() {
                return value
            }
            _ = run(mode: .default, before: .distantFuture)
        }
    }
}

extension RunLoopExecutor: SerialExecutorIdentity {
    /// Whether the caller runs on this run loop's thread, which then runs nothing else.
    package var isBlockedByCaller: Bool {
        reference.isCurrent
    }
}
