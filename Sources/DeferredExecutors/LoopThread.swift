import Deferred
import Dispatch
import Foundation
import Synchronization

/// The thread of a ``LoopExecutor`` and what it shares with the threads that submit to it.
///
/// What it guarantees:
/// - A body that ``accept(_:)`` accepts runs exactly once, on the thread, after the bodies
///   accepted before it; one it refuses (after ``shutdown()``) is never run, and the caller
///   releases it.
/// - A delayed body runs once, on the thread, no sooner than its deadline. ``shutdown()``
///   releases the delayed bodies not yet due at once; those already due run before the thread
///   ends.
/// - The thread waits only when it has nothing to run, and never past the earliest deadline.
///   Whatever gives it work while it waits or is about to (a push that finds the stack empty, a
///   delayed body that is now the earliest, the shutdown) signals ``wakeUp`` after making the
///   work visible, so a wait that begins after the work came returns at once: no work is left
///   waiting for a wake-up that already happened. (Signals the thread did not need only make a
///   later wait return early, and it looks again.)
/// - ``isCurrentThread`` is true only on the thread, and only while it runs the loop.
final class LoopThread: Sendable {
    /// Bodies accepted to run now, newest first; closed by shutdown.
    private let pending = ClosableStack<PendingBody>()

    /// Bodies waiting for their time.
    private let delayed = Locked(DelayedBodies())

    /// What the thread waits on when it has nothing to run.
    private let wakeUp = DispatchSemaphore(value: 0)

    /// Filled when the thread is about to exit.
    private let exited = Deferred<Void>()

    /// The thread while it runs the loop; cleared before it exits, so that a later thread given
    /// the same system identifier never passes for it.
    private let runningThread = Atomic<UInt>(0)

    /// Starts a thread named `name` and returns once it runs the loop.
    init(name: String) {
        let started = Deferred<Void>()
        let thread = Thread { [self] in
            nameCurrentThread(name)
            runningThread.store(currentThreadIdentifier, ordering: .releasing)
            started.fill()
            run()
        }
        thread.start()
        _ = started.wait(until: .distantFuture)
    }

    /// Whether the calling thread is this loop's thread, while the loop runs.
    var isCurrentThread: Bool {
        let running = runningThread.load(ordering: .acquiring)
        return running != 0 && running == currentThreadIdentifier
    }

    /// How many delayed bodies and timers wait, withdrawn timers not yet dropped included.
    var delayedCount: Int {
        delayed.withLock { $0.count }
    }

    /// Whether ``shutdown()`` has been called.
    var isShutDown: Bool {
        pending.isClosed
    }

    /// Queues `body` to run after the bodies accepted before it, unless the loop is shut down.
    ///
    /// - Returns: Whether `body` was accepted; if not, it will never run.
    func accept(_ body: @escaping @Sendable () -> Void) -> Bool {
        push(body, onto: pending) { wakeUp.signal() }
    }

    /// Runs `work` on the thread once `delay` has passed, unless the loop shuts down first (a
    /// timer is then abandoned).
    func accept(after delay: Duration, _ work: DelayedWork) {
        let deadline = ContinuousClock.now.advanced(by: delay.clampedForInstants)
        let (accepted, isEarliest) = delayed.withLock { bodies in
            bodies.insert(deadline: deadline, work)
        }
        if !accepted {
            work.release()
        } else if isEarliest {
            wakeUp.signal()  // The thread may wait for a later deadline.
        }
    }

    /// Refuses new bodies, releases the delayed ones not yet due, and lets the thread run the
    /// accepted bodies and the delayed ones already due, and exit.
    ///
    /// - Returns: A future filled when the thread has finished.
    @discardableResult
    func shutdown() -> Future<Void> {
        if closeTogether(pending, delayed) != nil {
            wakeUp.signal()
        }
        return Future(exited)
    }

    /// The thread's life: runs what is due, waits for more, until shut down and drained.
    private func run() {
        while true {
            let ranAccepted = runAccepted()
            if runDelayed() || ranAccepted {
                continue
            }
            if pending.isClosed {
                // Closed: nothing is pushed any more, and a push before the close was taken
                // by the look above or is taken by this one.
                // The delayed bodies the shutdown kept are due by now (see `closeTogether`).
                if runAccepted() || runDelayed() {
                    continue
                }
                break
            }
            wait(until: delayed.withLock { $0.firstDeadline })
        }
        runningThread.store(0, ordering: .releasing)
        exited.fill()
    }

    /// Runs the bodies pushed so far, oldest first; returns whether there were any.
    private func runAccepted() -> Bool {
        var bodies = pending.takeAll().reversed()
        guard !bodies.isEmpty else {
            return false
        }
        while let pending = bodies.popFirst() {
            pending.body()
        }
        return true
    }

    /// Runs the delayed bodies due by now, by deadline, then submission; returns whether there
    /// were any.
    private func runDelayed() -> Bool {
        let now = ContinuousClock.now
        var ran = false
        while let work = delayed.withLock({ $0.popFirst(dueBy: now) }) {
            work.run()
            ran = true
        }
        return ran
    }

    /// Waits until something signals, or `deadline` comes.
    private func wait(until deadline: ContinuousClock.Instant?) {
        guard let deadline else {
            wakeUp.wait()
            return
        }
        let remaining = ContinuousClock.now.duration(to: deadline)
        guard remaining > .zero else {
            return
        }
        let (seconds, attoseconds) = remaining.components
        guard seconds < 1_000_000_000 else {
            wakeUp.wait()  // Decades away: only a signal ends this wait.
            return
        }
        // Rounded up, so that the body is due when the wait ends.
        let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000) + 1
        _ = wakeUp.wait(timeout: .now() + .nanoseconds(nanoseconds))
    }
}
