import Dispatch

/// The instant after which a caller no longer waits for the work it started, carried from the
/// caller to the work in `async` code.
///
/// ``run(until:priority:_:)`` runs an operation under a deadline and returns at that deadline at
/// the latest; inside it, ``current`` reads the deadline, so that the work can pass what remains of
/// its caller's budget on, to a backend over the wire (``TimeoutHeader``) or to its own calls
/// under a deadline:
///
/// ```swift
/// func handle(_ request: Request) async throws -> Response {
///     try await Deadline.run(until: .now + .seconds(2)) {
///         var call = URLRequest(url: backend)
///         if let deadline = Deadline.current {
///             call.setValue(TimeoutHeader(until: deadline).description, forHTTPHeaderField: "grpc-timeout")
///         }
///         return try await Response(session.data(for: call))
///     }
/// }
/// ```
///
/// Deadlines nest: under an earlier deadline a later one changes nothing, so the work always sees
/// the earliest deadline of the calls around it. A deadline is an instant of the continuous clock
/// (`ContinuousClock`), which keeps counting while the machine sleeps, like the time a remote
/// caller waits.
public enum Deadline {
    /// The deadline of the work the current task does: the earliest of the deadlines of the
    /// ``run(until:priority:_:)`` calls it runs inside, or `nil` outside any.
    ///
    /// Tasks started inside, structured or not, inherit it, as they inherit every task-local
    /// value. The step closure of an attempt's `andThen` or `fallback`, and each retry of
    /// `retry`, reads its consumers' deadline here too while it runs (see
    /// ``Attempt/deadline(at:)``), so the work it starts can pass it on.
    public static var current: ContinuousClock.Instant? {
        innermost
    }

    /// The time that remains until ``current``, or `nil` outside any deadline; zero or less once
    /// it has passed.
    public static var remaining: Duration? {
        innermost.map { ContinuousClock.now.duration(to: $0) }
    }

    /// Runs `operation` under `deadline`, and returns its result, or fails with
    /// ``DeadlineError`` at the deadline if the operation has not finished by then.
    ///
    /// The operation runs in a task of its own, which inherits the caller's task-local values and
    /// (unless `priority` says otherwise) its priority, and reads the deadline as
    /// ``current``. When the deadline passes first, the operation's task is cancelled and this
    /// returns at once, with ``DeadlineError``: it never waits for an operation that ignores its
    /// cancellation. Such an operation runs on in its task until it returns, and what it returns
    /// is dropped. When the calling task is cancelled, the operation's task is cancelled too and
    /// this throws `CancellationError` at once. An error the operation throws in time is thrown as
    /// it is.
    ///
    /// Under an earlier deadline, the earlier one applies. A deadline that has passed already
    /// fails at once, and the operation never starts.
    ///
    /// The deadline is kept by the library's timers on Dispatch (as `timeout(after:upon:)` on a
    /// Dispatch queue is), on a queue of its own, so it passes on time, within the lateness the
    /// Performance guide measures, even while operations keep every thread of the task pool busy,
    /// and costs nothing once the operation finished. (The caller itself resumes once a thread of
    /// the task pool is free: it is a task too.)
    ///
    /// - Parameters:
    ///   - deadline: The instant after which the caller no longer waits.
    ///   - priority: The priority of the operation's task; `nil` inherits the caller's.
    ///   - operation: The work.
    /// - Returns: What `operation` returns.
    /// - Throws: ``DeadlineError`` if the deadline passes first, `CancellationError` if the
    ///   calling task is cancelled first, or what `operation` throws.
    public static func run<Success: Sendable>(
        until deadline: ContinuousClock.Instant,
        priority: TaskPriority? = nil,
        _ operation: sending @escaping @isolated(any) () async throws -> Success
    ) async throws -> Success {
        let effective = innermost.map { min($0, deadline) } ?? deadline
        let remaining = ContinuousClock.now.duration(to: effective)
        guard remaining > .zero else {
            throw DeadlineError()
        }
        try Task.checkCancellation()
        // The operation's task reads the deadline beside the caller's other task-local values;
        // the limit cancels that task as it passes, through the attempt it stops.
        let work = Attempt<Success, any Error>(priority: priority) {
            try await $innermost.withValue(effective) {
                try await operation()
            }
        }
        return try await work.timeout(after: remaining, upon: expiries, failingWith: DeadlineError())
            .get()
    }

    /// Where deadlines pass: a serial queue of its own.
    ///
    /// Dispatch gives it a thread even when every thread of its shared pool is busy. On Linux that
    /// pool also runs Swift's tasks, so a deadline passing on a global queue waited for a thread
    /// while operations that spin filled every one, and cancelled them only once they stopped by
    /// themselves.
    internal static let expiries = DispatchQueue(label: "Deferred.Deadline")

    /// The earliest deadline of the calls around the current task.
    @TaskLocal private static var innermost: ContinuousClock.Instant?

    /// Runs `body` with ``current`` reading `deadline` too, if it is on the continuous clock (the
    /// earliest wins): what a stage's step closure runs under, so that the work it starts sees
    /// its consumers' deadline.
    @usableFromInline
    internal static func run<Result>(under deadline: DeadlineMark?, _ body: () -> Result) -> Result {
        guard let instant = deadline?.instant(on: ContinuousClock()) else {
            return body()
        }
        return $innermost.withValue(innermost.map { min($0, instant) } ?? instant, operation: body)
    }
}
