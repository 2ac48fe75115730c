public import Dispatch

extension Future {
    /// Runs `work` off the calling thread, on a global concurrent Dispatch queue, and returns a
    /// read-only future filled with its result.
    ///
    /// ```swift
    /// let checksum = Future { computeChecksum(of: file) }
    /// checksum.upon(.main) { label.text = $0 }
    /// ```
    ///
    /// This is the simple future of 2014: work that runs in the background, and a value to
    /// wait for. Use ``async(upon:execute:)`` to choose the queue; a closure that awaits makes a
    /// task instead (``init(priority:operation:)``). To make a future whose *value* is a
    /// closure, write `Future(value: closure)`.
    ///
    /// - Parameter work: Computes the value; it runs exactly once.
    @inlinable
    public init(_ work: @escaping @Sendable () -> Value) {
        self = .async(upon: DispatchQueue.global(), execute: work)
    }

    /// Starts `operation` in a new task and returns a read-only future filled with its result.
    ///
    /// ```swift
    /// let thumbnail = Future { await renderer.thumbnail(for: photo) }
    /// thumbnail.upon(.main) { cell.image = $0 }
    /// ```
    ///
    /// The task inherits the caller's task-local values and, unless `priority` says otherwise,
    /// its priority, like `Task.init`.
    ///
    /// - Parameters:
    ///   - priority: The priority of the task; `nil` inherits it.
    ///   - operation: The work whose result fills the future.
    public init(priority: TaskPriority? = nil, operation: sending @escaping @isolated(any) () async -> Value) {
        let storage = Storage<Value>()
        Task(priority: priority) {
            _ = storage.fill(await operation())
        }
        self.init(storage: storage)
    }
}
