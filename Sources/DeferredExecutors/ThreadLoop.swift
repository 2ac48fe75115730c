import CoreFoundation
import Deferred
import Foundation
import Synchronization

/// The thread of a ``ThreadExecutor`` and the work it shares with the threads that submit to
/// it.
///
/// What it guarantees:
/// - A body that ``accept(_:)`` accepts runs exactly once, on the thread, after the bodies
///   accepted before it; one it refuses (after ``shutdown()``) is never run and is released
///   by the caller, who learns of the refusal.
/// - ``shutdown()`` releases every delayed body not yet due at once and lets the thread run the
///   accepted ones and the delayed ones already due; then the thread ends, and nothing of this loop outlives it: the run loop's blocks and
///   timers hold only the work, which holds nothing of Core Foundation, so no cycle runs
///   through the run loop (a block left in it after the thread exits goes with the run loop,
///   which goes with the executor).
/// - ``isCurrentThread`` is true only on the thread, and only while it runs the loop.
final class ThreadLoop: Sendable {
    private let work: ThreadWork
    private let runLoop: RunLoopReference

    /// Starts a thread named `name` and returns once it runs its run loop.
    init(name: String) {
        let work = ThreadWork()
        let started = Deferred<RunLoopReference>()
        let thread = Thread {
            nameCurrentThread(name)
            work.run(started: started)
        }
        thread.start()
        self.work = work
        runLoop = started.wait(until: .distantFuture)!
    }

    /// Whether the calling thread is this loop's thread, while the loop runs.
    var isCurrentThread: Bool {
        work.isCurrentThread
    }

    /// Whether ``shutdown()`` has been called.
    var isShutDown: Bool {
        work.pending.isClosed
    }

    /// Queues `body` to run after the bodies accepted before it, unless the loop is shut down.
    ///
    /// - Returns: Whether `body` was accepted; if not, it will never run.
    func accept(_ body: @escaping @Sendable () -> Void) -> Bool {
        push(body, onto: work.pending) {
            runLoop.perform { [work] in work.drain() }
        }
    }

    /// Runs `body` on the thread once `delay` has passed, unless the loop shuts down first.
    func accept(after delay: Duration, _ body: @escaping @Sendable () -> Void) {
        let deadline = ContinuousClock.now.advanced(by: delay.clampedForInstants)
        guard work.delayed.withLock({ $0.insert(deadline: deadline, .body(body)).accepted }) else {
            return
        }
        runLoop.perform(after: delay) { [work] in work.runDelayed(dueBy: deadline) }
    }

    /// Refuses new bodies, releases the delayed ones not yet due, and lets the thread run the
    /// accepted bodies and the delayed ones already due, and exit.
    ///
    /// - Returns: A future filled when the thread has finished.
    @discardableResult
    func shutdown() -> Future<Void> {
        if let now = closeTogether(work.pending, work.delayed) {
            runLoop.perform { [work] in work.finish(runningDelayedDueBy: now) }
        }
        return Future(work.exited)
    }
}

/// What a ``ThreadLoop``'s thread shares with the threads that submit to it.
private final class ThreadWork: Sendable {
    /// Bodies accepted to run now, newest first; closed by shutdown.
    let pending = ClosableStack<PendingBody>()

    /// Bodies taken from ``pending`` that have not run yet, oldest first.
    ///
    /// Only the thread touches them. A drain runs them from here, so that a drain nested in a
    /// body (a run loop run inside it) runs the older bodies first and submission order holds.
    private let taken = Locked(BodyQueue())

    /// Bodies waiting for their time.
    let delayed = Locked(DelayedBodies())

    /// Filled when the thread is about to exit.
    let exited = Deferred<Void>()

    /// The thread while it runs the loop; cleared before it exits, so that a later thread
    /// given the same system identifier never passes for it.
    private let runningThread = Atomic<UInt>(0)

    /// Set by the thread when the last bodies have run.
    private let isFinished = Atomic<Bool>(false)

    var isCurrentThread: Bool {
        let running = runningThread.load(ordering: .acquiring)
        return running != 0 && running == currentThreadIdentifier
    }

    /// The thread's life: runs the run loop until ``finish(runningDelayedDueBy:)``, then releases what is left.
    func run(started: Deferred<RunLoopReference>) {
        runningThread.store(currentThreadIdentifier, ordering: .releasing)
        let runLoop = CFRunLoopGetCurrent()!
        // A run loop without sources returns at once; a timer in the far future is the
        // simplest source to keep it waiting for work.
        let keepAlive = CFRunLoopTimerCreateWithHandler(nil, .greatestFiniteMagnitude, 0, 0, 0) { _ in }
        CFRunLoopAddTimer(runLoop, keepAlive, kCFRunLoopDefaultMode)
        started.fill(with: RunLoopReference(runLoop: runLoop, inCommonModes: false))
        while !isFinished.load(ordering: .acquiring) {
            _ = RunLoop.current.run(mode: .default, before: .distantFuture)
        }
        CFRunLoopTimerInvalidate(keepAlive)
        runningThread.store(0, ordering: .releasing)
        exited.fill()
    }

    /// Runs the pending bodies in order; on the thread.
    ///
    /// A drain may run inside a body that runs the run loop; then it first runs the bodies the
    /// outer drain has not reached yet. If the loop finished meanwhile (``finish(runningDelayedDueBy:)`` ran in such
    /// a nested run loop, whose run it stopped), the outer run is stopped here too.
    func drain() {
        var bodies = pending.takeAll().reversed()
        if !bodies.isEmpty {
            taken.withLock { queue in
                while let pending = bodies.popFirst() {
                    queue.append(pending.body)
                }
            }
        }
        while let body = taken.withLock({ $0.popFirst() }) {
            body()
        }
        stopIfFinished()
    }

    /// Stops the current run of the run loop if the loop finished while a body ran.
    ///
    /// The body ran the run loop itself and ``finish(runningDelayedDueBy:)`` ran in that nested
    /// run, whose stop did not reach the run this callout returns to. Every callout from the
    /// thread's run loop ends here.
    private func stopIfFinished() {
        if isFinished.load(ordering: .acquiring) {
            CFRunLoopStop(CFRunLoopGetCurrent())
        }
    }

    /// Runs the delayed bodies due by `deadline` or by now, whichever is later, in order of
    /// deadline, then of submission; on the thread.
    ///
    /// The timer for the body due at `deadline` calls it, so that body runs even if the timer
    /// fires a little before the clock says it is due.
    func runDelayed(dueBy deadline: ContinuousClock.Instant) {
        let end = max(deadline, .now)
        while let work = delayed.withLock({ $0.popFirst(dueBy: end) }) {
            work.run()
        }
        stopIfFinished()
    }

    /// Runs the last bodies and ends the loop; on the thread, after shutdown closed the stack.
    ///
    /// If this runs in a run loop nested in a body or a timer's callback, stopping the current
    /// run ends only the nested one; the block scheduled here stops the outer run at its next
    /// turn, once the nested one has returned.
    func finish(runningDelayedDueBy shutdownTime: ContinuousClock.Instant) {
        // The stack is closed, so nothing is pushed after this drain; the delayed bodies left
        // are those due by the shutdown, which no timer may have run yet.
        isFinished.store(true, ordering: .releasing)
        drain()
        while let work = delayed.withLock({ $0.popFirst(dueBy: shutdownTime) }) {
            work.run()
        }
        let runLoop = CFRunLoopGetCurrent()
        CFRunLoopStop(runLoop)
        RunLoopReference(runLoop: runLoop!, inCommonModes: false).perform {
            CFRunLoopStop(CFRunLoopGetCurrent())
        }
    }
}
