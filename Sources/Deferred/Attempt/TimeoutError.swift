/// The failure of an attempt of `any Error` whose time limit passed first, naming the limit.
///
/// ``Attempt/timeout(after:upon:)`` fails with it:
///
/// ```swift
/// do {
///     let page = try await api.page(id).timeout(after: .seconds(2), upon: DispatchQueue.global()).get()
/// } catch let error as TimeoutError {
///     print(error)  // "timed out after 2.0 seconds"
/// }
/// ```
///
/// Typed attempts say how a timeout fails with their own error, through
/// ``Attempt/timeout(after:upon:failingWith:)``.
public struct TimeoutError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The limit that passed.
    public let limit: Duration

    /// Creates the error of a limit that passed.
    ///
    /// - Parameter limit: The limit that passed.
    public init(limit: Duration) {
        self.limit = limit
    }

    /// Names the limit: "timed out after 2.0 seconds".
    public var description: String {
        "timed out after \(limit)"
    }
}
