/// An executor that can tell when the calling code keeps it from running anything else: a
/// serial executor running the caller, or the thread of a thread-bound executor.
///
/// Debug builds use it to catch a blocking wait that can never end with the value: a wait that
/// blocks the very executor on which a `map` must compute that value.
package protocol SerialExecutorIdentity: Executor {
    /// Whether this executor can run nothing else until the calling code returns.
    var isBlockedByCaller: Bool { get }
}

extension DeferredStorage {
    /// Traps if waiting for this unfilled storage from the calling code could never succeed,
    /// because the executor that must fill it is a serial one that the wait itself occupies.
    ///
    /// The check is exact rather than a guess: it fires only when the executor reports that
    /// the caller keeps it from running anything else. A map's executor never changes after the
    /// storage is made, so reading it races with nothing.
    @usableFromInline
    internal final func checkWaitCanSucceed() {
        guard let executor = fillingExecutor as? any SerialExecutorIdentity, executor.isBlockedByCaller else {
            return
        }
        preconditionFailure(
            """
            wait(until:) on a future of \(Value.self) can never return its value: a map on \
            \(type(of: executor)) computes it, and this wait blocks that executor, so the \
            transform cannot start until the wait ends. Use upon(_:execute:) or await, or wait \
            on another thread.
            """
        )
    }
}
