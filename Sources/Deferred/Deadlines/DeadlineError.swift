/// The failure of work whose caller's deadline passed before it finished.
///
/// ``Deadline/run(until:priority:_:)`` fails with it when its deadline passes first:
///
/// ```swift
/// do {
///     let profile = try await Deadline.run(until: .now + .seconds(2)) {
///         try await api.profile(id)
///     }
/// } catch is DeadlineError {
///     showCachedProfile()
/// }
/// ```
///
/// It is not a ``TimeoutError``: a timeout is a limit a stage sets on the attempt it reads
/// (`timeout(after:upon:)`), and says how long it waited; a deadline is the instant after which
/// the caller no longer waits, whoever set it and however deep the work that learns of it.
public struct DeadlineError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Creates the error of a deadline that passed.
    public init() {}

    /// "the deadline passed".
    public var description: String {
        "the deadline passed"
    }
}
