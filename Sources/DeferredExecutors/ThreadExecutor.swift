import CoreFoundation
public import Deferred
import Foundation
import Synchronization

/// An executor that owns one thread and runs every body on it, one at a time, in the order
/// submitted.
///
/// Use it to confine state that is not thread-safe to one thread, or as the "custom run loop"
/// of a subsystem (a game engine, a database connection, a legacy library that wants one
/// thread). The thread runs a Foundation run loop, so run-loop based APIs such as `Timer`
/// work inside its bodies.
///
/// ```swift
/// let database = ThreadExecutor(name: "database")
/// let rows = Future.async(upon: database) { connection.query("SELECT ...") }
/// rows.upon(database) { connection.cache($0) }  // same thread as the query
/// ```
///
/// ``shutdown()`` (or releasing the executor) stops the thread once the bodies already
/// submitted have run. A body submitted after that is not run: it is released at once, and
/// ``isShutDown`` tells that this happened. Delayed bodies that are not yet due at shutdown are
/// dropped the same way.
public final class ThreadExecutor: SchedulingExecutor {
    /// The name of the executor and its thread, for debuggers and logs.
    public let name: String

    private let loop: ThreadLoop

    /// Starts a thread named `name` and returns once it is ready to run bodies.
    ///
    /// - Parameter name: The name of the executor and of its thread.
    public init(name: String = "ThreadExecutor") {
        self.name = name
        loop = ThreadLoop(name: name)
    }

    deinit {
        loop.shutdown()
    }

    /// Runs `body` on this executor's thread after the bodies submitted before it.
    ///
    /// After ``shutdown()``, `body` is released without running.
    public func submit(_ body: @escaping @Sendable () -> Void) {
        loop.submit(body)
    }

    /// Runs `body` on this executor's thread once `delay` has passed.
    ///
    /// - Parameters:
    ///   - delay: How long to wait first.
    ///   - body: The work to run; dropped if the executor shuts down first.
    public func submit(after delay: Duration, _ body: @escaping @Sendable () -> Void) {
        loop.submit(after: delay, body)
    }

    /// Whether ``shutdown()`` has been called: new bodies are no longer run.
    public var isShutDown: Bool {
        loop.isShutDown
    }

    /// Whether the calling thread is this executor's thread.
    public var isCurrent: Bool {
        loop.isCurrentThread
    }

    /// Stops the thread once the bodies already submitted have run.
    ///
    /// Calling it again does nothing more. The returned future is filled when the thread has
    /// finished; it is safe to wait on from any other thread.
    ///
    /// - Returns: A future that is filled when the thread has exited.
    @discardableResult
    public func shutdown() -> Future<Void> {
        loop.shutdown()
    }
}

/// The state of a ``ThreadExecutor`` that its thread shares: the pending bodies and the
/// thread's run loop.
///
/// Kept apart from the executor so that the thread and its run loop never keep the executor
/// alive, and so that releasing the executor can still shut the thread down.
private final class ThreadLoop: Sendable {
    private let pending = ClosableStack<PendingBody>()
    private let control: LoopControl
    private let runLoop: RunLoopReference
    private let thread: ThreadIdentity

    init(name: String) {
        let control = LoopControl()
        let started = Deferred<(RunLoopReference, ThreadIdentity)>()
        let thread = Thread {
            ThreadLoop.nameCurrentThread(name)
            started.fill(with: (RunLoopReference(runLoop: CFRunLoopGetCurrent(), inCommonModes: false), .current))
            control.runUntilStopped()
        }
        thread.start()
        self.control = control
        (runLoop, self.thread) = started.wait(until: .distantFuture)!
    }

    var isCurrentThread: Bool {
        thread == .current
    }

    /// Gives the calling thread `name`, for Foundation and for the operating system.
    ///
    /// Debuggers and tools show the system's name. On Linux a name set before `start()` does
    /// not reach the thread, and Foundation's setter does not always reach the system either,
    /// so the name is also written where Linux keeps it.
    private static func nameCurrentThread(_ name: String) {
        Thread.current.name = name
        #if os(Linux)
            try? String(name.utf8.prefix(15))?.write(
                toFile: "/proc/thread-self/comm", atomically: false, encoding: .utf8)
        #endif
    }

    var isShutDown: Bool {
        pending.isClosed
    }

    func submit(_ body: @escaping @Sendable () -> Void) {
        // Only the push that finds the stack empty schedules a drain; the drain takes
        // everything pushed until it runs.
        if case .accepted(wasEmpty: true) = pending.push(PendingBody(body)) {
            runLoop.perform { [self] in drain() }
        }
    }

    func submit(after delay: Duration, _ body: @escaping @Sendable () -> Void) {
        guard !pending.isClosed else {
            return
        }
        runLoop.perform(after: delay) { [self] in
            if !pending.isClosed {
                body()
            }
        }
    }

    @discardableResult
    func shutdown() -> Future<Void> {
        if pending.close() {
            runLoop.perform { [self] in
                drain()
                control.stop()
                runLoop.stop()
            }
        }
        return Future(control.exited)
    }

    /// Runs the pending bodies in order, on the executor's thread.
    private func drain() {
        var bodies = pending.takeAll().reversed()
        while let pending = bodies.popFirst() {
            pending.body()
        }
    }
}

/// A body waiting on a ``ThreadExecutor``'s stack; released right after it runs.
private final class PendingBody: StackNode {
    let body: @Sendable () -> Void
    var next: UInt = 0

    init(_ body: @escaping @Sendable () -> Void) {
        self.body = body
    }
}

/// What the executor's thread needs to know: whether to keep running, and where to report
/// that it exited.
private final class LoopControl: Sendable {
    private let isRunning = Atomic<Bool>(true)

    /// Filled when the thread is about to exit.
    let exited = Deferred<Void>()

    /// Asks the thread to stop once its run loop returns; called on the thread itself.
    func stop() {
        isRunning.store(false, ordering: .releasing)
    }

    /// Runs the current thread's run loop until ``stop()``.
    func runUntilStopped() {
        // A run loop without sources returns at once; a timer in the far future is the
        // simplest source to keep it waiting for work.
        let keepAlive = CFRunLoopTimerCreateWithHandler(nil, .greatestFiniteMagnitude, 0, 0, 0) { _ in }
        CFRunLoopAddTimer(CFRunLoopGetCurrent(), keepAlive, kCFRunLoopDefaultMode)
        while isRunning.load(ordering: .acquiring) {
            _ = RunLoop.current.run(mode: .default, before: .distantFuture)
        }
        CFRunLoopTimerInvalidate(keepAlive)
        exited.fill()
    }
}

/// The identity of a thread, comparable from any thread.
private struct ThreadIdentity: Equatable, Sendable {
    private let id: UInt

    /// The calling thread.
    static var current: ThreadIdentity {
        #if canImport(Darwin)
            ThreadIdentity(id: UInt(bitPattern: pthread_self()))
        #else
            ThreadIdentity(id: UInt(pthread_self()))
        #endif
    }
}

extension ThreadExecutor: SerialExecutor, TaskExecutor {
    /// Runs `job` on this executor's thread, after the bodies and jobs submitted before it.
    ///
    /// This makes the executor usable as the executor of an actor, so that the actor and
    /// callback-based code share one thread:
    ///
    /// ```swift
    /// actor Database {
    ///     let thread = ThreadExecutor(name: "database")
    ///     nonisolated var unownedExecutor: UnownedSerialExecutor { thread.asUnownedSerialExecutor() }
    /// }
    /// ```
    ///
    /// and as a task executor, with `Task(executorPreference: thread) { ... }`. A job enqueued
    /// after ``shutdown()`` stops the program with a message: dropping it would leave its task
    /// suspended forever.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        precondition(!isShutDown, "a job was enqueued on ThreadExecutor \"\(name)\" after shutdown()")
        submit { [self] in
            job.runSynchronously(isolatedTo: asUnownedSerialExecutor(), taskExecutor: asUnownedTaskExecutor())
        }
    }

    /// This executor as the executor of an actor.
    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// This executor as the preferred executor of a task.
    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    /// Stops the program unless the caller runs on this executor's thread.
    ///
    /// Lets `assumeIsolated` succeed for an actor on this executor in bodies submitted to it.
    public func checkIsolated() {
        precondition(isCurrent, "expected to run on ThreadExecutor \"\(name)\"")
    }

    /// Whether the caller runs on this executor's thread.
    public func isIsolatingCurrentContext() -> Bool? {
        isCurrent
    }
}

extension ThreadExecutor: SerialExecutorIdentity {
    /// Whether the caller runs on this executor's thread, which then runs nothing else.
    package var isBlockedByCaller: Bool {
        isCurrent
    }
}
