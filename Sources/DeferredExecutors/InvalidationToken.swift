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
    /// The token's validity (bit 0 set when invalid) and how many bodies are running (the other
    /// bits, counting in twos).
    private let state = Atomic<UInt>(0)

    /// The bodies run through tokens that enclose the calling code, innermost first: bound on
    /// the thread (or task) for the length of each body, so that ``invalidate()`` called from a
    /// body does not wait for that body.
    ///
    /// A task started inside a body inherits the binding though it runs elsewhere, and maybe
    /// later on the same thread, once the body has returned: so each entry also names the thread
    /// its body runs on and says whether the body is still running, and only running bodies of
    /// the calling thread count.
    @TaskLocal private static var enclosing: EnclosingBody?

    /// Creates a valid token.
    public init() {}

    /// Whether bodies submitted through this token still run.
    public var isValid: Bool {
        state.load(ordering: .acquiring) & 1 == 0
    }

    /// Makes the token invalid for good: once this returns, no body submitted through the
    /// token is running or will start.
    ///
    /// Bodies that are running on other threads when it is called finish first: the call waits
    /// for them (briefly spinning, then sleeping). A body calling it for its own token is not
    /// waited for. So never call it while holding up a running body of the same token (for
    /// example from the main thread while that body waits for the main thread), which would
    /// wait forever.
    public func invalidate() {
        let before = state.bitwiseOr(1, ordering: .acquiringAndReleasing).oldValue
        guard before >> 1 != 0 else {
            return
        }
        let own = Self.enclosing?.count(of: self, on: currentThreadIdentifier) ?? 0
        var pause = PauseBackoff()
        while state.load(ordering: .acquiring) >> 1 > own {
            pause.next()
        }
    }

    /// Runs `body` unless the token is invalid; deciding and counting it as running is one
    /// atomic step, so ``invalidate()`` sees every body that started.
    fileprivate func run(_ body: () -> Void) {
        guard state.update({ $0 & 1 == 0 ? $0 + 2 : nil }).updated else {
            return
        }
        let entry = EnclosingBody(token: self, thread: currentThreadIdentifier, outer: Self.enclosing)
        defer {
            entry.end()
            state.subtract(2, ordering: .releasing)
        }
        Self.$enclosing.withValue(entry, operation: body)
    }

    /// Returns an executor that runs bodies on `base` while this token is valid.
    ///
    /// - Parameter base: Where bodies run.
    /// - Returns: An executor that checks this token before each body.
    public func validating<Base: Executor>(_ base: Base) -> InvalidatingExecutor<Base> {
        InvalidatingExecutor(base: base, token: self)
    }
}

/// A body running through a token, the thread it runs on, whether it still runs, and the body
/// it runs inside, if any.
private final class EnclosingBody: Sendable {
    let token: InvalidationToken
    let thread: UInt
    let outer: EnclosingBody?

    /// Cleared when the body returns: a task that inherited this entry and runs later, on the
    /// same thread, is not inside the body any more.
    private let isRunning = Atomic<Bool>(true)

    init(token: InvalidationToken, thread: UInt, outer: EnclosingBody?) {
        self.token = token
        self.thread = thread
        self.outer = outer
    }

    /// Marks the body as returned; on its thread, before the token stops counting it.
    func end() {
        isRunning.store(false, ordering: .releasing)
    }

    /// How many of the bodies from here outwards run through `token` on `thread` right now.
    ///
    /// A body on `thread` that still runs encloses the caller, which runs on the same thread;
    /// one that returned does not, whatever the task-local binding says.
    func count(of token: InvalidationToken, on thread: UInt) -> UInt {
        var count: UInt = 0
        var body: EnclosingBody? = self
        while let current = body {
            let encloses = current.token === token && current.thread == thread
            count += encloses && current.isRunning.load(ordering: .acquiring) ? 1 : 0
            body = current.outer
        }
        return count
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
