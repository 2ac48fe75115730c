public import Dispatch

extension Future {
    /// Runs `work` on `executor` and returns a future filled with its result.
    ///
    /// ```swift
    /// let checksum = Future.async(upon: .global()) { computeChecksum(of: file) }
    /// ```
    ///
    /// - Parameters:
    ///   - executor: Where `work` runs. The default is a global concurrent Dispatch queue.
    ///   - work: Computes the value; it runs exactly once.
    /// - Returns: A read-only future of `work`'s result.
    @inlinable
    public static func async(
        upon executor: some Executor = DispatchQueue.global(),
        execute work: @escaping @Sendable () -> Value
    ) -> Future<Value> {
        let storage = Storage<Value>()
        executor.submit {
            _ = storage.fill(work())
        }
        return Future(storage: storage)
    }
}
