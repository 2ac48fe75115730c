import Foundation

/// A value that threads share through an `NSLock`, a lock that ThreadSanitizer understands on
/// every platform.
///
/// `@unchecked Sendable` is sound because ``state`` is read and written only inside
/// ``withLock(_:)``, which holds the lock for the whole access, and `State` is itself Sendable.
final class Locked<State: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    /// Unchecked for exclusivity: the lock already makes every access exclusive, and the
    /// run-time check cost a virtual clock's schedule a tenth of its instructions.
    @exclusivity(unchecked)
    private var state: State

    init(_ state: State) {
        self.state = state
    }

    /// Runs `body` on the state while holding the lock.
    func withLock<Result>(_ body: (inout State) -> Result) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return body(&state)
    }
}
