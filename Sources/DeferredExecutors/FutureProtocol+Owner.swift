public import Deferred

extension FutureProtocol {
    /// Calls `body` with `owner` and the value, on `executor`, unless `owner` is gone by then.
    ///
    /// The future keeps only a weak reference to `owner`, so a pending request never keeps a
    /// screen or controller alive; if `owner` has been released when the value arrives, `body`
    /// is skipped and released.
    ///
    /// ```swift
    /// service.profile().upon(.main, owner: self) { screen, profile in screen.show(profile) }
    /// ```
    ///
    /// - Parameters:
    ///   - executor: Where `body` runs. See `Executor` in the Deferred module.
    ///   - owner: The object `body` works on; held weakly.
    ///   - body: Called at most once, with `owner` and the value.
    public func upon<Owner: AnyObject & Sendable>(
        _ executor: some Executor,
        owner: Owner,
        execute body: @escaping @Sendable (Owner, Value) -> Void
    ) {
        upon(executor) { [weak owner] value in
            if let owner {
                body(owner, value)
            }
        }
    }
}
