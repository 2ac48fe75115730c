public import Dispatch

extension Attempt {
    /// Runs `work` on `executor` and returns an attempt that finishes with its result; what it
    /// throws is the failure.
    ///
    /// ```swift
    /// let parsed = Attempt<Config, ConfigError>.async(upon: .global()) { () throws(ConfigError) in
    ///     try Config(parsing: text)
    /// }
    /// ```
    ///
    /// If the attempt is cancelled before `work` starts, `work` never runs.
    ///
    /// - Parameters:
    ///   - executor: Where `work` runs. The default is a global concurrent Dispatch queue.
    ///   - work: Computes the success, or throws the failure.
    /// - Returns: An attempt of `work`'s result.
    public static func async(
        upon executor: some Executor = DispatchQueue.global(),
        execute work: @escaping @Sendable () throws(Failure) -> Success
    ) -> Attempt {
        let control = AttemptControl<Success, Failure>()
        executor.submit {
            guard !control.isFinished else {
                return
            }
            control.complete(with: Result(catching: work))
        }
        return Attempt(control)
    }

    /// Starts `operation` in a new task and returns an attempt that finishes with its result.
    ///
    /// ```swift
    /// let profile = Attempt { () async throws(APIError) in try await api.profile(id) }
    /// ```
    ///
    /// Cancelling the attempt cancels the task; the task's own result then changes nothing.
    ///
    /// - Parameters:
    ///   - priority: The priority of the task; `nil` inherits it.
    ///   - operation: The work; what it throws is the failure.
    public init(
        priority: TaskPriority? = nil,
        operation: sending @escaping @isolated(any) () async throws(Failure) -> Success
    ) {
        let control = AttemptControl<Success, Failure>()
        let task = Task(priority: priority) {
            do throws(Failure) {
                control.complete(with: .success(try await operation()))
            } catch {
                control.complete(with: .failure(error))
            }
        }
        control.onCancel { task.cancel() }
        self.init(control)
    }
}
