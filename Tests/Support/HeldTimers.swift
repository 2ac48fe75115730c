public import Deferred
import Foundation

/// A scheduling executor whose delayed bodies never come due: it holds each one until it is
/// dropped, as a timer set far in the future would, so a test can check what a pending timer
/// keeps alive without waiting for it or leaving it pending when the process exits.
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
}
