public import Deferred
import Foundation

/// A scheduling executor whose delayed bodies never come due: it holds each one, as a timer set
/// far in the future would, so a test can check what a pending timer keeps alive without waiting
/// for it or leaving it pending when the process exits.
///
/// Call ``discardAll()`` when the test ends: a node that keeps its executor (a delay, a retry)
/// and a body that keeps the node make a cycle that only running or dropping the body breaks.
public final class HeldTimers: SchedulingExecutor, @unchecked Sendable {
    // `@unchecked Sendable`: `bodies` is read and written only under `lock`.
    private let lock = NSLock()
    private var bodies: [@Sendable () -> Void] = []

    /// Creates an executor holding no body.
    public init() {}

    /// How many delayed bodies it holds.
    public var count: Int {
        lock.withLock { bodies.count }
    }

    /// Runs `body` at once.
    public func submit(_ body: @escaping @Sendable () -> Void) {
        body()
    }

    /// Holds `body`, which never runs.
    public func submit(after delay: Duration, _ body: @escaping @Sendable () -> Void) {
        lock.withLock { bodies.append(body) }
    }

    /// Drops every body it holds, unrun.
    public func discardAll() {
        let dropped = lock.withLock {
            defer { bodies = [] }
            return bodies
        }
        _ = dropped  // Released here, outside the lock: a body's captures may do anything on release.
    }

    /// Runs every body it holds, once, as if their time had come, on the calling thread.
    public func fireAll() {
        let due = lock.withLock {
            defer { bodies = [] }
            return bodies
        }
        for body in due {
            body()
        }
    }
}
