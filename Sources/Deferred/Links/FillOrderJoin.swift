/// The join of `valuesInFillOrder`: yields each input's value to a stream as it arrives, and
/// finishes the stream after the last.
///
/// `AsyncStream.Continuation` is `Sendable` and may be used from any thread.
@usableFromInline
internal final class FillOrderJoin<Element: Sendable>: FutureJoin<Element>, @unchecked Sendable {
    /// Where the values go.
    @usableFromInline
    internal let continuation: AsyncStream<Element>.Continuation

    @usableFromInline
    internal init(count: Int, continuation: AsyncStream<Element>.Continuation) {
        self.continuation = continuation
        super.init(count: count)
    }

    @usableFromInline
    override internal func receive(_ value: Element, at index: Int, in queue: inout DrainQueue) {
        continuation.yield(value)
    }

    @usableFromInline
    override internal func complete(in queue: inout DrainQueue) {
        continuation.finish()
    }
}
