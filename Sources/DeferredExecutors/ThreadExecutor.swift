public import Deferred

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
/// let rows = Future(upon: database) { connection.query("SELECT ...") }
/// rows.upon(database) { connection.cache($0) }  // same thread as the query
/// ```
///
/// ``shutdown()`` (or releasing the executor) stops the thread once the bodies already
/// submitted have run. A body submitted after that is not run: it is released at once, and
/// ``isShutDown`` tells that this happened. Delayed bodies that are not yet due at shutdown are
/// released by ``shutdown()`` without running; those already due run before the thread ends. An actor job enqueued after shutdown stops the
/// program with a message naming the executor (see ``enqueue(_:)``). Once the thread has
/// exited, nothing of the executor is left behind but its run loop (with any timers that bodies
/// left in it), which goes with the executor; ``isCurrent`` is false on every thread, including
/// later ones that the system gives the same identifier.
///
/// A body may run the run loop itself (to wait for a `Timer`, say): bodies submitted meanwhile
/// run inside it, still in submission order, after those queued before them; and a shutdown that
/// comes meanwhile still ends the thread once the body returns.
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
        _ = loop.accept(body)
    }

    /// Runs `body` on this executor's thread once `delay` has passed.
    ///
    /// - Parameters:
    ///   - delay: How long to wait first.
    ///   - body: The work to run; dropped if the executor shuts down first.
    public func submit(after delay: Duration, _ body: @escaping @Sendable () -> Void) {
        loop.accept(after: delay, body)
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
        // One step decides: the job is queued, or the executor is shut down and this traps.
        let accepted = loop.accept { [self] in
            job.runSynchronously(isolatedTo: asUnownedSerialExecutor(), taskExecutor: asUnownedTaskExecutor())
        }
        if !accepted {
            // `fatalError`, not `precondition`: a release build keeps only this message.
            fatalError("a job was enqueued on ThreadExecutor \"\(name)\" after shutdown()")
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
        if !isCurrent {
            fatalError("expected to run on ThreadExecutor \"\(name)\"")
        }
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
