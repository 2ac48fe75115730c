public import Dispatch

/// Blocks until `peek` returns a value or `time` passes; the shared body of every `wait`.
///
/// Returns at once, without allocating, when the value is there, and returns `nil` at once
/// when `time` has passed. Otherwise it polls for a few microseconds, since a value that
/// another thread is about to deliver arrives far sooner than a sleeping thread wakes; then
/// it asks `notify` to signal a semaphore once the value exists and sleeps on it.
@usableFromInline
internal func blockingWait<Value>(
    until time: DispatchTime,
    peek: () -> Value?,
    notify: (_ signal: @escaping @Sendable () -> Void) -> Void
) -> Value? {
    if let value = peek() {
        return value
    }
    guard time > DispatchTime.now() else {
        return nil
    }
    for _ in 0..<blockingWaitSpins {
        if let value = peek() {
            return value
        }
    }
    let filled = DispatchSemaphore(value: 0)
    notify { filled.signal() }
    _ = filled.wait(timeout: time)
    return peek()
}

/// How many times a blocking wait polls before it sleeps: a few microseconds.
private let blockingWaitSpins = 2_000
