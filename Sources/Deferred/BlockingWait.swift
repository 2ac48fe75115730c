public import Dispatch

/// Blocks until `peek` returns a value or `time` passes; the shared body of every `wait`.
///
/// Returns at once, without allocating, when the value is there, and returns `nil` at once
/// when `time` has passed. Otherwise it asks `notify` to signal a semaphore once the value
/// exists and sleeps on it.
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
    let filled = DispatchSemaphore(value: 0)
    notify { filled.signal() }
    _ = filled.wait(timeout: time)
    return peek()
}
