public import Deferred
import Foundation
import Synchronization

/// A switch that turns off callbacks that are no longer wanted.
///
/// Wrap an executor with ``validating(_:)`` and a body submitted through it runs only if the
/// token is still valid when the body's turn comes; once ``invalidate()`` is called, pending
/// and future bodies are skipped and released. This solves the reusable-cell problem: the
/// late reply of an old request must not land in a view that now shows something else.
///
/// ```swift
/// final class AvatarCell {
///     private var token = InvalidationToken()
///
///     func show(_ user: User) {
///         token.invalidate()           // drop the previous user's late reply
///         token = InvalidationToken()
///         images.avatar(for: user).upon(token.validating(.main)) { [weak self] in self?.image = $0 }
///     }
/// }
/// ```
public final class InvalidationToken: Sendable {
    /// Whether the token was invalidated, for the check before a body is queued; the decision
    /// that counts is made under the lock in ``Bodies``.
    private let invalid = Atomic<Bool>(false)

    /// The bodies running now, by the thread they run on.
    private let bodies = Locked(Bodies())

    /// Creates a valid token.
    public init() {}

    /// Whether bodies submitted through this token still run.
    public var isValid: Bool {
        !invalid.load(ordering: .acquiring)
    }

    /// Makes the token invalid for good: once this returns, no body submitted through the
    /// token will start, and none is running but the ones this call runs inside.
    ///
    /// Bodies that are running on other threads when it is called finish first: the call waits
    /// for them (briefly spinning, then sleeping). It does not wait for a body it runs inside
    /// (one running on the calling thread: the caller is that body, or code nested in it, such
    /// as a task that runs in the body's run loop), nor for a body that is itself in
    /// `invalidate()` (two bodies invalidating their token at once would otherwise wait for each
    /// other). So never call it while holding up a running body of the same token from another
    /// thread (for example from the main thread while that body waits for the main thread),
    /// which would wait forever.
    public func invalidate() {
        let thread = currentThreadIdentifier
        let anyRunning = bodies.withLock { bodies in
            invalid.store(true, ordering: .releasing)
            // The bodies on this thread enclose the caller: they finish after it returns, and
            // whoever else waits for the token must not wait for them either.
            bodies.release(on: thread)
            return bodies.runningCount > 0
        }
        guard anyRunning else {
            return
        }
        var pause = PauseBackoff()
        while bodies.withLock({ $0.runningCount > 0 }) {
            pause.next()
        }
    }

    /// Runs `body` unless the token is invalid; deciding and counting it as running is one
    /// step, so ``invalidate()`` sees every body that started.
    fileprivate func run(_ body: () -> Void) {
        let thread = currentThreadIdentifier
        guard bodies.withLock({ $0.start(on: thread, unless: invalid.load(ordering: .relaxed)) }) else {
            return
        }
        defer { bodies.withLock { $0.end(on: thread) } }
        body()
    }

    /// Returns an executor that runs bodies on `base` while this token is valid.
    ///
    /// - Parameter base: Where bodies run.
    /// - Returns: An executor that checks this token before each body.
    public func validating<Base: Executor>(_ base: Base) -> InvalidatingExecutor<Base> {
        InvalidatingExecutor(base: base, token: self)
    }
}

/// The bodies of a token that are running, by thread: those that ``InvalidationToken/invalidate()``
/// waits for, and those it does not (the ones that enclose a call to it).
///
/// A body runs synchronously on one thread, so while it runs, any code on that thread is nested
/// in it: counting by thread tells an enclosing body from one running elsewhere, whatever task
/// the caller is in.
private struct Bodies: Sendable {
    /// Bodies running per thread that `invalidate()` waits for.
    private var running: [UInt: Int] = [:]

    /// Bodies running per thread that enclose a call to `invalidate()`: nobody waits for them.
    private var released: [UInt: Int] = [:]

    /// How many running bodies `invalidate()` waits for.
    private(set) var runningCount = 0

    /// Counts a body starting on `thread`, unless `invalid`; returns whether it may start.
    mutating func start(on thread: UInt, unless invalid: Bool) -> Bool {
        guard !invalid else {
            return false
        }
        running[thread, default: 0] += 1
        runningCount += 1
        return true
    }

    /// Counts a body on `thread` as finished: a released one if any is left there (the
    /// innermost bodies return first, and a release covers every body on the thread).
    mutating func end(on thread: UInt) {
        if let count = released[thread] {
            released[thread] = count > 1 ? count - 1 : nil
        } else {
            let count = running[thread, default: 1]
            running[thread] = count > 1 ? count - 1 : nil
            runningCount -= 1
        }
    }

    /// Stops waiting for the bodies running on `thread`: they enclose the caller.
    mutating func release(on thread: UInt) {
        guard let count = running.removeValue(forKey: thread) else {
            return
        }
        released[thread, default: 0] += count
        runningCount -= count
    }
}

/// Waiting that yields the processor a few times, then sleeps for longer and longer (up to a
/// millisecond): for waits that are usually over in microseconds but may last longer.
private struct PauseBackoff {
    private var rounds = 0

    mutating func next() {
        rounds += 1
        if rounds <= 16 {
            sched_yield()
        } else {
            let microseconds = min(1 << min(rounds - 16, 10), 1_000)
            Thread.sleep(forTimeInterval: Double(microseconds) / 1_000_000)
        }
    }
}

/// An executor that runs bodies on another executor only while an ``InvalidationToken`` is
/// valid.
///
/// Made by ``InvalidationToken/validating(_:)``. A body submitted after invalidation is
/// released at once; one submitted before is checked again when its turn comes on the base
/// executor, skipped if the token is invalid by then, and released either way.
public final class InvalidatingExecutor<Base: Executor>: Executor {
    /// The executor that runs the bodies.
    public let base: Base

    /// The token that decides whether they run.
    public let token: InvalidationToken

    fileprivate init(base: Base, token: InvalidationToken) {
        self.base = base
        self.token = token
    }

    /// Runs `body` on the base executor if the token is still valid by then.
    public func submit(_ body: @escaping @Sendable () -> Void) {
        guard token.isValid else {
            return
        }
        base.submit { [token] in token.run(body) }
    }
}

extension InvalidatingExecutor: SchedulingExecutor where Base: SchedulingExecutor {
    /// Runs `body` on the base executor after `delay` if the token is still valid by then.
    ///
    /// - Parameters:
    ///   - delay: How long to wait first.
    ///   - body: The work to run.
    public func submit(after delay: Duration, _ body: @escaping @Sendable () -> Void) {
        guard token.isValid else {
            return
        }
        base.submit(after: delay) { [token] in token.run(body) }
    }
}
