public import Deferred
public import Dispatch
import Foundation

extension FutureProtocol {
    /// Waits up to ten seconds for the value, so that a broken test fails instead of hanging.
    public func value(within seconds: Double = 10) -> Value? {
        wait(until: .now() + seconds)
    }
}

/// Runs `body` on a thread of its own and waits up to `seconds` for it; `false` if it did not
/// return by then (a deadlock, say), so that a broken test fails instead of hanging.
public func returnsOnAThread(within seconds: Double, _ body: @escaping @Sendable () -> Void) -> Bool {
    let done = DispatchSemaphore(value: 0)
    Thread {
        body()
        done.signal()
    }.start()
    return done.wait(timeout: .now() + seconds) == .success
}

/// Polls `condition` every millisecond for up to `seconds`; whether it held by then.
public func holds(within seconds: Double, _ condition: () -> Bool) -> Bool {
    let deadline = Date(timeIntervalSinceNow: seconds)
    while !condition() {
        if Date() > deadline { return condition() }
        Thread.sleep(forTimeInterval: 0.001)
    }
    return true
}

/// Occupies `executor`'s thread with a body that waits, and returns once that body runs: what
/// is submitted from now on waits behind it until the returned semaphore is signalled.
public func holdThread(of executor: some Executor) -> DispatchSemaphore {
    let release = DispatchSemaphore(value: 0)
    let holding = Deferred<Void>()
    executor.submit {
        holding.fill()
        release.wait()
    }
    _ = holding.value()
    return release
}

extension DispatchQueue {
    /// Returns once every body submitted to this serial queue so far has run and been released.
    public func flush() {
        sync {}
    }
}

/// An identifier of the calling thread, for checks of where code ran.
public func currentThreadID() -> ObjectIdentifier {
    ObjectIdentifier(Thread.current)
}
