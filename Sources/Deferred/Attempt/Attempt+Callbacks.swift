public import Dispatch

extension Attempt {
    /// Calls `body` with the value, on `executor`, if the attempt succeeds and is not cancelled.
    ///
    /// A cancellation withdraws the callback: if ``cancel()`` has returned by the time `body`
    /// would start, it never runs, even if the attempt had already succeeded. So code that
    /// cancels the previous request before it starts the next one never sees a stale result.
    ///
    /// It returns this attempt, so the failure callback can follow:
    ///
    /// ```swift
    /// search(query)
    ///     .uponSuccess(.main) { show($0) }
    ///     .uponFailure(.main) { showError($0) }
    /// ```
    ///
    /// - Parameters:
    ///   - executor: Where `body` runs; a global concurrent Dispatch queue by default.
    ///   - body: Called once with the value, or never.
    /// - Returns: This attempt.
    @_disfavoredOverload  // `.mainActor` picks the overload whose body is main-actor isolated.
    @inlinable
    @discardableResult
    public func uponSuccess(
        _ executor: some Executor = DispatchQueue.global(),
        execute body: @escaping @Sendable (Success) -> Void
    ) -> Attempt {
        deliver({ $0.success }, on: executor, to: body)
        return self
    }

    /// Calls `body` with the error, on `executor`, if the attempt fails and is not cancelled.
    ///
    /// A cancelled attempt — cancelled itself, or failed because an attempt it depends on was
    /// cancelled — calls no failure callback: cancelling is the consumer's choice, not an error
    /// to report. Use ``upon(_:execute:)`` and ``isCancelled`` to see cancellations too. Like
    /// ``uponSuccess(_:execute:)-(Executor,_)``, a cancellation withdraws the callback if it has not
    /// started.
    ///
    /// - Parameters:
    ///   - executor: Where `body` runs; a global concurrent Dispatch queue by default.
    ///   - body: Called once with the error, or never.
    /// - Returns: This attempt.
    @_disfavoredOverload  // `.mainActor` picks the overload whose body is main-actor isolated.
    @inlinable
    @discardableResult
    public func uponFailure(
        _ executor: some Executor = DispatchQueue.global(),
        execute body: @escaping @Sendable (Failure) -> Void
    ) -> Attempt {
        deliver({ $0.failure }, on: executor, to: body)
        return self
    }

    /// Calls `body` with what `part` takes from the result (the value or the error), on
    /// `executor`, unless the attempt is cancelled by the time `body` would start; pins the
    /// attempt, like every handler.
    @inlinable
    internal func deliver<Part>(
        _ part: @escaping @Sendable (Result<Success, Failure>) -> Part?, on executor: some Executor,
        to body: @escaping @Sendable (Part) -> Void
    ) {
        node.pin()
        if executor.runsInPlace, let result = node.peek() {
            if let part = part(result), !node.isCancelledFlag {
                body(part)
            }
        } else {
            // The immediate executor is stored as the shared instance, so that the one the
            // caller made for `.immediate` is never kept, and the optimizer drops it.
            let stored: any Executor = executor.runsInPlace ? ImmediateExecutor.shared : executor
            node.add(
                .sourcedCallback(stored) { source, result in
                    if let part = part(result), !AttemptNode<Success, Failure>.source(source).isCancelledFlag {
                        body(part)
                    }
                })
        }
    }
}

extension Attempt {
    /// Calls `body`, isolated to the main actor, with the value if the attempt succeeds and is
    /// not cancelled.
    ///
    /// Because `body` is main-actor isolated, it may update main-actor state directly, and a
    /// ``cancel()`` that returned on the main actor before `body` would start withdraws it:
    ///
    /// ```swift
    /// @MainActor func queryChanged(to text: String) {
    ///     search?.cancel()  // the previous query's results never reach the screen
    ///     search = api.search(text).uponSuccess(.mainActor) { self.results = $0 }
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - executor: ``Executor/mainActor``.
    ///   - body: Called once with the value on the main actor, or never.
    /// - Returns: This attempt.
    @discardableResult
    public func uponSuccess(
        _ executor: MainActorExecutor,
        execute body: @escaping @MainActor @Sendable (Success) -> Void
    ) -> Attempt {
        deliver({ $0.success }, on: executor, to: { value in MainActor.assumeIsolated { body(value) } })
        return self
    }

    /// Calls `body`, isolated to the main actor, with the error if the attempt fails and is not
    /// cancelled.
    ///
    /// A ``cancel()`` before `body` starts withdraws it. See
    /// `uponSuccess(.mainActor)`.
    ///
    /// - Parameters:
    ///   - executor: ``Executor/mainActor``.
    ///   - body: Called once with the error on the main actor, or never.
    /// - Returns: This attempt.
    @discardableResult
    public func uponFailure(
        _ executor: MainActorExecutor,
        execute body: @escaping @MainActor @Sendable (Failure) -> Void
    ) -> Attempt {
        deliver({ $0.failure }, on: executor, to: { error in MainActor.assumeIsolated { body(error) } })
        return self
    }

    /// Calls `body`, isolated to the main actor, with the result once the attempt has finished,
    /// unless it is cancelled before `body` starts.
    ///
    /// Unlike ``upon(_:execute:)``, which reports every result, a main-actor delivery is a
    /// callback that a cancellation withdraws, like ``uponSuccess(_:execute:)-(Executor,_)``: once
    /// ``cancel()`` has returned, a result that has not reached the main actor yet never does,
    /// so screens never show a superseded answer. This is the attempt's implementation of
    /// ``FutureProtocol/uponMainActor(execute:)``, so code written against `FutureProtocol`
    /// gets the same withdrawal.
    ///
    /// - Parameter body: Called once with the result on the main actor, or never.
    public func uponMainActor(execute body: @escaping @MainActor @Sendable (Result<Success, Failure>) -> Void) {
        deliver({ $0 }, on: MainActorExecutor.shared, to: { result in MainActor.assumeIsolated { body(result) } })
    }
}
