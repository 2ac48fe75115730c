import Synchronization

/// A copyable, `Sendable` place to keep a ``DeferredAttempt``: it is given the writer once and
/// hands it out once.
///
/// A writer is noncopyable, so it cannot sit in a dictionary, an array or a property that is
/// set after `init`. A box can: keep the box wherever the writer must wait, and ``take()`` the
/// writer out when the result is known. A dictionary of pending requests keyed by id is then
/// plain code:
///
/// ```swift
/// var pending: [UInt32: DeferredAttemptBox<Reply, any Error>] = [:]  // under your lock
///
/// // Sending request `id`:
/// let writer = DeferredAttempt<Reply, any Error>()
/// let box = DeferredAttemptBox(writer)
/// pending[id] = box
/// return box.attempt
///
/// // When reply `id` arrives: remove the box under the lock, finish the writer after it.
/// pending.removeValue(forKey: id)?.take()?.succeed(with: reply)
/// ```
///
/// Exactly one ``take()`` returns the writer, whichever threads race for it. A writer still in
/// the box when the box is released is released with it, and fails its attempt as abandoned, as
/// any lost writer does (see ``DeferredAttempt``).
public final class DeferredAttemptBox<Success: Sendable, Failure: Error>: Sendable {
    /// Whether the writer has been taken.
    private let taken = Atomic<Bool>(false)

    /// The writer until it is taken.
    ///
    /// `nonisolated(unsafe)` is sound: only the one caller that wins ``taken``'s exchange reads
    /// or changes it, and the implicit `deinit` (which releases a writer never taken) runs after
    /// every reference, and so every such access, has ended.
    nonisolated(unsafe) private var writer: DeferredAttempt<Success, Failure>?

    /// The attempt that the writer completes, whether or not it has been taken.
    public let attempt: Attempt<Success, Failure>

    /// Creates a box that holds `writer`.
    ///
    /// - Parameter writer: The writer to keep; the box owns it from now on.
    public init(_ writer: consuming DeferredAttempt<Success, Failure>) {
        attempt = writer.attempt
        self.writer = consume writer
    }

    /// Takes the writer out: the first call returns it, every later one `nil`.
    ///
    /// - Returns: The writer, or `nil` if it was taken already.
    public func take() -> DeferredAttempt<Success, Failure>? {
        guard !taken.exchange(true, ordering: .acquiringAndReleasing) else {
            return nil
        }
        return writer.take()
    }

    /// Whether the writer has been taken out.
    public var isEmpty: Bool {
        taken.load(ordering: .acquiring)
    }
}
