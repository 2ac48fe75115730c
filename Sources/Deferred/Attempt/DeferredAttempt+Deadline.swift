extension DeferredAttempt {
    /// The instant until which a consumer will still take this attempt's result, or `nil` if
    /// some consumer has no deadline (or there is none yet).
    ///
    /// A producer reads it to pass its callers' budget on to its own backends, or to stop work
    /// that nobody will wait for:
    ///
    /// ```swift
    /// func profile(_ id: ID) -> Attempt<Profile, any Error> {
    ///     let writer = DeferredAttempt<Profile, any Error>()
    ///     let attempt = writer.attempt
    ///     queue.async {
    ///         let timeout = writer.deadline.map { TimeoutHeader(until: $0).description }
    ///         backend.get("/profiles/\(id)", grpcTimeout: timeout) { writer.fill(with: $0) }
    ///     }
    ///     return attempt
    /// }
    /// ```
    ///
    /// It is the latest deadline among the consumers that need the attempt now, each counting
    /// the earlier of its own deadline (``Attempt/deadline(at:)``, a `timeout`) and its own
    /// consumers' (so a deadline set on a stage far below reaches the producer), and a task
    /// awaiting `get()` under ``Deadline/run(until:priority:_:)`` counting its deadline. One
    /// consumer without a deadline (a handler added with `upon`, a plain reader, a stage that has
    /// no deadline and no consumer of its own) makes it `nil`: that consumer waits for as long as
    /// it takes. It may read later than exact (an attempt keeps the latest deadline its bounded
    /// consumers had until none is left), never earlier.
    ///
    /// A `timeout` counts where it is set on a tracked attempt: this one once the producer first
    /// asked (read this, or added a handler with ``onDeadlineChange(_:)``), and any stage made
    /// from a tracked attempt after that (a stage made before stays untracked until a deadline
    /// reaches it). Until then, limits cost nothing more than their timer.
    /// ``Attempt/deadline(at:)`` always counts: ask first, or use it, where the producer must
    /// know.
    ///
    /// When it passes and nothing else needs the attempt, the attempt is cancelled, and the
    /// cancel handlers learn ``CancellationReason/deadlinePassed``.
    public var deadline: ContinuousClock.Instant? {
        deadline(on: ContinuousClock())
    }

    /// The instant until which a consumer will still take this attempt's result, on `clock`.
    ///
    /// See ``deadline``; `clock` is the one the deadlines are kept on (the `VirtualTimeExecutor`
    /// of a test, say). `nil` also if they are kept on another clock.
    ///
    /// - Parameter clock: The clock the deadlines are kept on.
    /// - Returns: The instant, or `nil`.
    public func deadline<C: DeadlineClock>(on clock: C) -> C.Instant? {
        DeadlineLedger.shared.neededUntil(node)?.instant(on: clock)
    }

    /// The time left until ``deadline``, or `nil` if there is none; zero or less once it has
    /// passed.
    public var remaining: Duration? {
        deadline.map { ContinuousClock.now.duration(to: $0) }
    }

    /// Calls `handler` with each new ``deadline``, beginning now with the current one if there
    /// is one: when a consumer with a deadline comes, when one without comes, when one leaves.
    ///
    /// It runs on the thread that made the change, after the change, never two at a time; keep
    /// it short (re-arm a timer, store the instant).
    ///
    /// - Parameter handler: Called with the instant, or `nil` once some consumer has none.
    public func onDeadlineChange(_ handler: @escaping @Sendable (ContinuousClock.Instant?) -> Void) {
        onDeadlineChange(on: ContinuousClock(), handler)
    }

    /// Calls `handler` with each new deadline on `clock`: see ``onDeadlineChange(_:)``.
    ///
    /// - Parameters:
    ///   - clock: The clock the deadlines are kept on.
    ///   - handler: Called with the instant, or `nil`.
    public func onDeadlineChange<C: DeadlineClock>(on clock: C, _ handler: @escaping @Sendable (C.Instant?) -> Void) {
        DeadlineLedger.shared.observe(node) { mark in
            handler(mark?.instant(on: clock))
        }
    }

    /// Registers what cancelling means, with why: `handler` runs once, with the reason, if the
    /// attempt is stopped before it completes (at once if it was), and never if it completes
    /// first.
    ///
    /// ```swift
    /// writer.onCancel { reason in
    ///     request.cancel()
    ///     if reason == .deadlinePassed { metrics.lateRequests += 1 }
    /// }
    /// ```
    ///
    /// The same handler as ``onCancel(_:)``, which it may stand beside: the reason is
    /// ``CancellationReason/cancelled`` when someone cancelled (the attempt, or a consumer that
    /// was all that needed it, or a task awaiting it), ``CancellationReason/deadlinePassed`` when
    /// the deadline of a consumer that was all that needed it passed, and
    /// ``CancellationReason/unneeded`` when its consumers let go without either.
    ///
    /// - Parameter handler: Stops the work; gets why.
    public func onCancel(reporting handler: @escaping @Sendable (CancellationReason) -> Void) {
        node.onCancel(reporting: handler)
    }
}
