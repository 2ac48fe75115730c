extension Sequence where Element: FutureProtocol {
    /// Returns the values of these futures as an asynchronous sequence, in the order they are
    /// filled, ending after the last.
    ///
    /// ```swift
    /// for await page in pageFutures.valuesInFillOrder() {
    ///     show(page)  // the fastest first
    /// }
    /// ```
    ///
    /// Values that arrive before they are read are buffered. If the iterating task is
    /// cancelled, the sequence ends.
    ///
    /// - Returns: A stream of every value, in the order the futures were filled.
    public func valuesInFillOrder() -> AsyncStream<Element.Value> {
        let (stream, continuation) = AsyncStream<Element.Value>.makeStream()
        let futures = Array(self)
        guard !futures.isEmpty else {
            continuation.finish()
            return stream
        }
        let join = FillOrderJoin(count: futures.count, continuation: continuation)
        for (index, future) in futures.enumerated() {
            join.link(future, at: index)
        }
        return stream
    }
}
