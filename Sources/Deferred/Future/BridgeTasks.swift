import Synchronization

/// Where the tasks that the library's bridges start (`Future { await … }`, `Attempt { try await
/// … }`) run: on the task executor of the scope a test's clock opens for the code it runs, while
/// that scope is open, and otherwise where any new task runs.
///
/// A task-local value, so every task started in the scope carries it; an unstructured task that
/// outlives the scope carries it too, which is why the scope is closed, not just left: the
/// bridges' tasks started after it ends prefer no executor. `VirtualTimeExecutor.run(within:_:)`
/// (in `DeferredExecutors`) opens one, so that every step of the code under test runs on the
/// clock, whose auto-advance then knows when nothing is left to run.
package enum BridgeTasks {
    /// The open scope, if any.
    @TaskLocal package static var scope: Scope?

    /// The executor a bridge's task prefers now, or `nil` for no preference.
    package static var executor: (any TaskExecutor)? {
        scope?.executor
    }

    /// A span of code whose bridges' tasks prefer one executor, until it is closed.
    package final class Scope: Sendable {
        private let preferred: any TaskExecutor
        private let isOpen = Atomic<Bool>(true)

        /// Opens a scope whose bridges' tasks prefer `executor`.
        package init(preferring executor: any TaskExecutor) {
            preferred = executor
        }

        /// The executor, while the scope is open.
        package var executor: (any TaskExecutor)? {
            isOpen.load(ordering: .acquiring) ? preferred : nil
        }

        /// Closes the scope: bridges' tasks started later prefer no executor.
        package func close() {
            isOpen.store(false, ordering: .releasing)
        }
    }
}
