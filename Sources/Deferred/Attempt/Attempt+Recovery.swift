extension Attempt {
    /// Returns an attempt that succeeds with this attempt's value, or with the value
    /// `recovery` makes from its error.
    ///
    /// ```swift
    /// let settings = loadSettings().recover(upon: .immediate) { _ in .defaults }
    /// ```
    ///
    /// A cancellation is not a failure to recover from: it passes through, and `recovery` does
    /// not run.
    ///
    /// - Parameters:
    ///   - executor: Where `recovery` runs. See ``Executor``.
    ///   - recovery: Makes a value from the error, or throws a failure.
    /// - Returns: An attempt that fails only if `recovery` throws, or is cancelled.
    @inlinable
    public func recover(
        upon executor: some Executor,
        substituting recovery: @escaping @Sendable (Failure) throws(Failure) -> Success
    ) -> Attempt<Success, Failure> {
        attach(
            RecoverAttemptNode(on: self, executor: executor.runsInPlace ? nil : executor, recovery: recovery),
            RecoverAttemptNode<Success, Failure>.receive
        )
    }

    /// Returns an attempt that succeeds with this attempt's value, or continues with the attempt
    /// `start` makes from its error.
    ///
    /// ```swift
    /// let page = primary.fetch(path).fallback(upon: .global()) { _ in mirror.fetch(path) }
    /// ```
    ///
    /// A cancellation passes through, and `start` does not run. Cancelling the new attempt
    /// cancels whichever attempt it is waiting for, unless something else needs it.
    ///
    /// - Parameters:
    ///   - executor: Where `start` runs. See ``Executor``.
    ///   - start: Starts another attempt from the error, or throws a failure.
    /// - Returns: An attempt of this attempt's value or the fallback's result.
    @inlinable
    public func fallback(
        upon executor: some Executor,
        to start: @escaping @Sendable (Failure) throws(Failure) -> Attempt<Success, Failure>
    ) -> Attempt<Success, Failure> {
        attach(
            FallbackAttemptNode(on: self, executor: executor.runsInPlace ? nil : executor, start: start),
            FallbackAttemptNode<Success, Failure>.receive
        )
    }
}

/// The node of a `recover`: runs the recovery on a failure that is not a cancellation.
@usableFromInline
internal final class RecoverAttemptNode<Success: Sendable, Failure: Error>:
    StepAttemptNode<Success, Failure, Success, Failure>, @unchecked Sendable
{
    @exclusivity(unchecked)
    @usableFromInline
    internal var recovery: (@Sendable (Failure) throws(Failure) -> Success)?

    @inlinable
    internal init(
        on source: Attempt<Success, Failure>,
        executor: (any Executor)?,
        recovery: @escaping @Sendable (Failure) throws(Failure) -> Success
    ) {
        self.recovery = recovery
        super.init(on: source, executor: executor, cancellation: source.node.cancellation)
    }

    @inlinable
    override internal func passedOn(_ input: Result<Success, Failure>) -> Result<Success, Failure>? {
        if case .success = input { input } else { nil }
    }

    @inlinable
    override internal func cancellationPassedOn(_ input: Result<Success, Failure>) -> Failure? {
        input.failure ?? cancellationError
    }

    @inlinable
    override internal func runStep(_ input: Result<Success, Failure>) -> Result<Success, Failure>? {
        guard let recovery = recovery.take(), case .failure(let error) = input else {
            return nil
        }
        return Result { () throws(Failure) in try recovery(error) }
    }

    @inlinable
    override internal func dropStep() {
        recovery = nil
    }
}

/// The node of a `fallback`: starts another attempt from a failure that is not a cancellation.
@usableFromInline
internal final class FallbackAttemptNode<Success: Sendable, Failure: Error>:
    FollowingAttemptNode<Success, Success, Failure>, @unchecked Sendable
{
    @exclusivity(unchecked)
    @usableFromInline
    internal var start: (@Sendable (Failure) throws(Failure) -> Attempt<Success, Failure>)?

    @inlinable
    internal init(
        on source: Attempt<Success, Failure>,
        executor: (any Executor)?,
        start: @escaping @Sendable (Failure) throws(Failure) -> Attempt<Success, Failure>
    ) {
        self.start = start
        super.init(on: source, executor: executor)
    }

    @inlinable
    override internal func passedOn(_ input: Result<Success, Failure>) -> Result<Success, Failure>? {
        if case .success = input { input } else { nil }
    }

    @inlinable
    override internal func runStep(_ input: Result<Success, Failure>) -> Result<Attempt<Success, Failure>, Failure>? {
        guard let start = start.take(), case .failure(let error) = input else {
            return nil
        }
        return Result { () throws(Failure) in try start(error) }
    }

    @inlinable
    override internal func dropStep() {
        start = nil
    }
}
