/// Why an attempt's producer was told to stop: what its cancel handlers learn
/// (``DeferredAttempt/onCancel(reporting:)``).
///
/// ```swift
/// let lookup = DeferredAttempt<Record, any Error>()
/// lookup.onCancel { reason in
///     metrics.count(reason == .deadlinePassed ? "lookup.late" : "lookup.abandoned")
///     query.cancel()
/// }
/// ```
///
/// Reasons travel up a chain with the stop: when a stage's deadline passes and nothing else needs
/// the work above it, every producer above learns ``deadlinePassed``; when a consumer is
/// cancelled, ``cancelled``.
public enum CancellationReason: Sendable, Hashable, CustomStringConvertible {
    /// Someone cancelled: `cancel()` on the attempt or on a consumer that was all that needed it,
    /// or the task awaiting it with `get()`.
    case cancelled
    /// A deadline passed: of a consumer that was all that needed it (`deadline(at:)`, a
    /// `timeout`), or of a caller under ``Deadline/run(until:priority:_:)``.
    case deadlinePassed
    /// Nobody needs the result any more: every consumer let go of it without cancelling (it was
    /// released, or a join it fed settled without it).
    case unneeded

    /// "cancelled", "deadline passed" or "unneeded".
    public var description: String {
        switch self {
        case .cancelled: "cancelled"
        case .deadlinePassed: "deadline passed"
        case .unneeded: "unneeded"
        }
    }
}
