import Dispatch

extension Attempt {
    /// Returns an attempt that finishes like this one if it finishes before `deadline`, and
    /// otherwise fails at the deadline, cancelling this attempt unless something else needs it.
    ///
    /// ```swift
    /// let reply = api.search(query).deadline(at: request.deadline)
    /// ```
    ///
    /// Unlike ``timeout(after:upon:failingWith:)``, which counts from now, this names the instant
    /// after which the caller no longer waits, and tells the work: the new attempt's deadline
    /// travels up to every attempt it needs, and a producer reads it (see
    /// ``DeferredAttempt/deadline``) to pass the budget on to its own backends or to give up
    /// early. The producers learn ``CancellationReason/deadlinePassed`` when it passes.
    ///
    /// When the deadline passes first, the new attempt fails with:
    /// - ``DeadlineError`` if `Failure` is `any Error`;
    /// - `Failure.deadlinePassed` if `Failure` is an ``ExpirableError``;
    /// - otherwise the attempt's cancellation error (`.cancelled` for a ``CancellableError``, or
    ///   the writer's `cancellationError:`).
    ///
    /// A failure type with none of these has no error to fail with: use
    /// ``deadline(at:failingWith:)``; this one stops the program, naming the type.
    ///
    /// The deadline passes on the library's timers on Dispatch (as a `timeout` on a Dispatch
    /// queue does), on a queue of their own, within the lateness the Performance guide measures;
    /// one that has already passed fails the new attempt, and tells the work, before this returns.
    ///
    /// - Parameter deadline: The instant after which the result is no longer wanted.
    /// - Returns: An attempt of this attempt's result, or of the deadline's failure.
    public func deadline(at deadline: ContinuousClock.Instant) -> Attempt<Success, Failure> {
        self.deadline(at: deadline, failingWith: Self.deadlineFailure(of: node))
    }

    /// Returns an attempt that finishes like this one if it finishes before `deadline`, and
    /// otherwise fails with `error`: see ``deadline(at:)``.
    ///
    /// - Parameters:
    ///   - deadline: The instant after which the result is no longer wanted.
    ///   - error: The failure when the deadline passes first.
    /// - Returns: An attempt of this attempt's result, or of `error`.
    public func deadline(at deadline: ContinuousClock.Instant, failingWith error: Failure) -> Attempt<
        Success, Failure
    > {
        let clock = ContinuousClock()
        return limited(
            after: clock.now.duration(to: deadline), upon: Deadline.expiries, failingWith: error,
            deadline: DeadlineMark(deadline, on: clock))
    }

    /// Returns an attempt that finishes like this one if it finishes before `deadline` on
    /// `clock`, and otherwise fails at the deadline: ``deadline(at:)`` on a clock of its own,
    /// such as the `VirtualTimeExecutor` of a test, which passes it exactly when it reaches it.
    ///
    /// ```swift
    /// let clock = VirtualTimeExecutor()
    /// let reply = service.lookup(key).deadline(at: clock.now + .seconds(2), on: clock)
    /// clock.advance(by: .seconds(2))  // reply fails with DeadlineError
    /// ```
    ///
    /// - Parameters:
    ///   - deadline: The instant after which the result is no longer wanted.
    ///   - clock: The clock, which also runs the expiry.
    /// - Returns: An attempt of this attempt's result, or of the deadline's failure.
    public func deadline<C: DeadlineClock & SchedulingExecutor>(at deadline: C.Instant, on clock: C) -> Attempt<
        Success, Failure
    > {
        self.deadline(at: deadline, on: clock, failingWith: Self.deadlineFailure(of: node))
    }

    /// Returns an attempt that finishes like this one if it finishes before `deadline` on
    /// `clock`, and otherwise fails with `error`: see ``deadline(at:on:)``.
    ///
    /// - Parameters:
    ///   - deadline: The instant after which the result is no longer wanted.
    ///   - clock: The clock, which also runs the expiry.
    ///   - error: The failure when the deadline passes first.
    /// - Returns: An attempt of this attempt's result, or of `error`.
    public func deadline<C: DeadlineClock & SchedulingExecutor>(
        at deadline: C.Instant, on clock: C, failingWith error: Failure
    ) -> Attempt<Success, Failure> {
        limited(
            after: clock.now.duration(to: deadline), upon: clock, failingWith: error,
            deadline: DeadlineMark(deadline, on: clock))
    }

    /// The failure of a passed deadline for `node`'s failure type; stops the program if the type
    /// has none.
    internal static func deadlineFailure(of node: AttemptNode<Success, Failure>) -> Failure {
        if let error = node.deadlineFailure {
            return error
        }
        preconditionFailure(
            "deadline(at:) has no error to fail \(Self.self) with: \(Failure.self) is neither an ExpirableError "
                + "nor a CancellableError and has no cancellation error; use deadline(at:failingWith:)")
    }

}

extension AttemptNode {
    /// The failure of a passed deadline for this attempt's failure type: ``DeadlineError`` for
    /// `any Error`, `.deadlinePassed` for an ``ExpirableError``, else its cancellation error;
    /// `nil` if it has none of these.
    @usableFromInline
    internal final var deadlineFailure: Failure? {
        if let error = DeadlineError() as? Failure {
            return error
        }
        if let expirable = Failure.self as? any ExpirableError.Type {
            return Self.deadlinePassed(of: expirable) as? Failure
        }
        return cancellationError
    }

    private static func deadlinePassed<E: ExpirableError>(of _: E.Type) -> any Error {
        E.deadlinePassed
    }
}
