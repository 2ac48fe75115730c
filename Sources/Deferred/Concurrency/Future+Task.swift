extension Future {
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
