/// The failure of an attempt whose writer was released before it finished.
///
/// A ``DeferredAttempt`` is the only way to finish its attempt. When it goes away while the
/// attempt is pending, nothing can finish the attempt any more, so instead of leaving every
/// reader waiting, the attempt fails there and then:
/// - with this error if its failure type is `any Error`;
/// - with `Failure.abandoned` if its failure type is an ``AbandonableError``.
///
/// ```swift
/// do {
///     let data = try await download.get()
/// } catch let error as AbandonedError {
///     print(error)  // DeferredAttempt<Data, any Error> made at App/Client.swift:42 was released before it finished
/// }
/// ```
///
/// It is neither a cancellation nor an error of the work: the producer forgot to finish.
public struct AbandonedError: Error, Equatable, CustomStringConvertible {
    /// The writer's type, such as `DeferredAttempt<Data, any Error>`.
    public let writerType: String

    /// The file where the writer was made (`#fileID`).
    public let file: String

    /// The line where the writer was made.
    public let line: UInt

    /// Creates the error for a writer of `writerType` made at `file`, `line`.
    ///
    /// - Parameters:
    ///   - writerType: The writer's type, such as `DeferredAttempt<Data, any Error>`.
    ///   - file: The file where the writer was made.
    ///   - line: The line where the writer was made.
    public init(writerType: String, file: String, line: UInt) {
        self.writerType = writerType
        self.file = file
        self.line = line
    }

    /// What was lost and where it was made.
    public var description: String {
        "\(writerType) made at \(file):\(line) was released before it finished"
    }
}

/// An error type with a case for an attempt whose writer was released before it finished.
///
/// ```swift
/// enum DownloadError: CancellableError, AbandonableError {
///     case offline
///     case cancelled
///     case abandoned
/// }
/// ```
///
/// An attempt of such a type whose ``DeferredAttempt`` goes away while it is pending fails with
/// `.abandoned` at once; see ``AbandonedError``. If the type has no cancellation error either, a
/// producer that stops on `onCancel` by dropping its writer finishes the attempt as abandoned:
/// fail it with an error of your own first.
public protocol AbandonableError: Error {
    /// The error of an attempt whose writer was released before it finished.
    static var abandoned: Self { get }
}

extension AttemptNode {
    /// Finishes this attempt as abandoned if it is pending and its failure type can say so, or
    /// else orphans it: its writer, made at `file`, `line`, is gone.
    ///
    /// It decides like `fail(with:)`, on the releasing thread: the writer's release is where
    /// the producer stopped being able to finish.
    @usableFromInline
    internal final func abandon(file: StaticString, line: UInt) {
        guard
            let error = abandonedError(
                AbandonedError(writerType: DeferredAttempt<Success, Failure>.typeName, file: "\(file)", line: line))
        else {
            // A recorded writer whose attempt something waits for is reported (see
            // ``PendingFutures``).
            if PendingFutures.isRecording, isTrackedWaitedFor {
                PendingFutures.writerLost(self)
            }
            orphan()
            return
        }
        decide(.failure(error))
    }

    /// `abandoned` as this attempt's failure, or the failure type's own `abandoned`; `nil` if
    /// the failure type cannot say "abandoned".
    @usableFromInline
    internal final func abandonedError(_ abandoned: @autoclosure () -> AbandonedError) -> Failure? {
        if Failure.self == (any Error).self {
            return (abandoned() as any Error as! Failure)
        }
        if let abandonable = Failure.self as? any AbandonableError.Type {
            return (abandonable.abandoned as any Error as! Failure)
        }
        return nil
    }
}
