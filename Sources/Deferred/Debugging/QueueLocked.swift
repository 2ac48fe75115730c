import Dispatch

/// A value guarded by a serial Dispatch queue, for the debugging aids' lists: ThreadSanitizer
/// understands it, and the lists are touched only on the paths that report or look them up,
/// never on a future's hot path.
internal final class QueueLocked<Value>: @unchecked Sendable {
    // `@unchecked Sendable` is sound: `value` is read and written only inside `queue.sync`,
    // which runs one closure at a time.
    private let queue: DispatchQueue
    private var value: Value

    init(_ value: Value, label: String) {
        self.value = value
        queue = DispatchQueue(label: label)
    }

    /// Runs `body` with the value, alone.
    func sync<Result>(_ body: (inout Value) -> Result) -> Result {
        queue.sync { body(&value) }
    }
}
