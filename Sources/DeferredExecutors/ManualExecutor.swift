public import Deferred

/// An executor that keeps its bodies until its owner runs them.
///
/// Nothing runs on its own: the owner calls ``runUntilIdle()`` (say, once per frame of a
/// game loop or per turn of a UI-like loop) or ``runOne()`` to step through work
/// deterministically in a test. Bodies run in the order they were submitted, on the thread
/// that drains; any thread may submit, and a body may submit more work.
///
/// ```swift
/// let frame = ManualExecutor()
/// score.upon(frame) { hud.show($0) }
/// // ... in the game loop:
/// frame.runUntilIdle()
/// ```
///
/// Submitting and taking a body are O(1), whatever is pending.
public final class ManualExecutor: Executor {
    private let pending = Locked(BodyQueue())

    /// Creates an executor with no pending work.
    public init() {}

    /// Keeps `body` until the owner runs it.
    public func submit(_ body: @escaping @Sendable () -> Void) {
        pending.withLock { $0.append(body) }
    }

    /// Whether bodies are waiting to run.
    public var hasPendingWork: Bool {
        pending.withLock { !$0.isEmpty }
    }

    /// Runs the oldest pending body, if there is one.
    ///
    /// - Returns: Whether a body ran.
    @discardableResult
    public func runOne() -> Bool {
        guard let body = pending.withLock({ $0.popFirst() }) else {
            return false
        }
        body()
        return true
    }

    /// Runs pending bodies, oldest first, until none is left, including bodies that they
    /// submit.
    ///
    /// A body that keeps submitting more work keeps this call running.
    ///
    /// - Returns: How many bodies ran.
    @discardableResult
    public func runUntilIdle() -> Int {
        var count = 0
        while runOne() {
            count += 1
        }
        return count
    }
}

extension ManualExecutor: TaskExecutor {
    /// Keeps `job`, a step of a task that prefers this executor, until the owner runs it, in
    /// submission order with the bodies.
    ///
    /// A task prefers the executor with `Task(executorPreference: executor) { … }` or
    /// `withTaskExecutorPreference(executor) { … }`, and its child tasks inherit that: each of
    /// its steps then runs in ``runOne()`` or ``runUntilIdle()``, on the thread that drains.
    ///
    /// ```swift
    /// let steps = ManualExecutor()
    /// let task = Task(executorPreference: steps) { await model.refresh() }
    /// steps.runUntilIdle()   // the refresh runs to its first wait for other work
    /// ```
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        pending.withLock { $0.append { [self] in job.runSynchronously(on: asUnownedTaskExecutor()) } }
    }

    /// This executor as the preferred executor of a task.
    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }
}
