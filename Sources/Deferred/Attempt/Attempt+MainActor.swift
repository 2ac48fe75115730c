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
        deliverOnMainActor { result in
            if case .success(let value) = result {
                body(value)
            }
        }
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
        deliverOnMainActor { result in
            if case .failure(let error) = result {
                body(error)
            }
        }
        return self
    }

    /// Calls `body`, isolated to the main actor, with the result once the attempt has finished,
    /// unless it is cancelled before `body` starts.
    ///
    /// Unlike ``upon(_:execute:)``, which reports every result, a main-actor delivery is a
    /// callback that a cancellation withdraws, like ``uponSuccess(_:execute:)-(Executor,_)``: once
    /// ``cancel()`` has returned, a result that has not reached the main actor yet never does,
    /// so screens never show a superseded answer. (Code written against `FutureProtocol` gets
    /// the protocol's `uponMainActor`, which reports every result.)
    ///
    /// - Parameter body: Called once with the result on the main actor, or never.
    public func uponMainActor(execute body: @escaping @MainActor @Sendable (Result<Success, Failure>) -> Void) {
        deliverOnMainActor(body)
    }

    /// Pins the attempt and calls `body` with the result on the main actor, unless the attempt
    /// is cancelled by the time `body` would start there.
    private func deliverOnMainActor(_ body: @escaping @MainActor @Sendable (Result<Success, Failure>) -> Void) {
        node.pin()
        node.settleIfAbandoned()
        node.add(
            .sourcedCallback(MainActorExecutor.shared) { source, result in
                if !AttemptNode<Success, Failure>.source(source).isCancelledFlag {
                    MainActor.assumeIsolated { body(result) }
                }
            })
    }
}
