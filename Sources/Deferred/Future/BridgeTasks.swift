/// Where the tasks that the library's bridges start (`Future { await … }`, `Attempt { try await
/// … }`) run: on the task executor a test's clock sets for the code it runs, and otherwise where
/// any new task runs.
///
/// A task-local value, so the bridges' tasks, which inherit task-local values, pass it on to the
/// tasks they start in turn. `VirtualTimeExecutor.run(within:_:)` (in `DeferredExecutors`) sets
/// it, so that every step of the code under test runs on the clock, whose auto-advance then
/// knows when nothing is left to run.
package enum BridgeTasks {
    /// The task executor a bridge's task prefers, or `nil` for no preference.
    @TaskLocal package static var executor: (any TaskExecutor)?
}
