import Foundation

/// A value that threads share through an `NSLock` (which ThreadSanitizer reads correctly, unlike
/// `Mutex` on this toolchain).
public final class Locked<State: Sendable>: @unchecked Sendable {
    // @unchecked: `state` is read and written only while `lock` is held.
    private let lock = NSLock()
    private var state: State

    /// Shares `state`.
    public init(_ state: State) {
        self.state = state
    }

    /// Runs `body` on the state while holding the lock.
    public func withLock<Result>(_ body: (inout State) -> Result) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return body(&state)
    }
}
