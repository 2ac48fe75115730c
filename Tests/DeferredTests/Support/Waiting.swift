import Deferred
import Dispatch

extension FutureProtocol {
    /// Waits up to ten seconds for the value, so that a broken test fails instead of hanging.
    func value(within seconds: Double = 10) -> Value? {
        wait(until: .now() + seconds)
    }
}

extension DispatchQueue {
    /// Returns once every body submitted to this serial queue so far has run and been released.
    func flush() {
        sync {}
    }
}
