public import Dispatch

extension Future {
    /// Runs `work` on `executor` and returns a read-only future filled with its result.
    ///
    /// ```swift
    /// let checksum = Future { computeChecksum(of: file) }  // on a global Dispatch queue
    /// let thumbnail = Future(upon: renderQueue) { render(photo) }
    /// checksum.upon(.main) { label.text = $0 }
    /// ```
    ///
    /// This is the simple future of 2014: work that runs in the background, and a value to wait
    /// for. A closure that awaits makes a task instead (``init(priority:operation:)``). To make
    /// a future whose *value* is a closure, write `Future(filledWith: closure)`.
    ///
    /// - Parameters:
    ///   - executor: Where `work` runs. The default is a global concurrent Dispatch queue.
    ///   - work: Computes the value; it runs exactly once.
    @inlinable
    public init(upon executor: some Executor = DispatchQueue.global(), _ work: @escaping @Sendable () -> Value) {
        let storage = Storage<Value>()
        executor.submit {
            _ = storage.fill(work())
        }
        self.init(storage: storage)
    }

    /// Runs `work` on `executor` and returns a future filled with its result.
    @_documentation(visibility: internal)
    @available(*, deprecated, renamed: "init(upon:_:)")
    @inlinable
    public static func async(
        upon executor: some Executor = DispatchQueue.global(),
        execute work: @escaping @Sendable () -> Value
    ) -> Future<Value> {
        Future(upon: executor, work)
    }
}
