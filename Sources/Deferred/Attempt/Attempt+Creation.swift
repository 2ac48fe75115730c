public import Dispatch

extension Attempt {
    /// Creates an attempt from the result of `body`, which runs now, on the calling thread, like
    /// `Result(catching:)`.
    ///
    /// ```swift
    /// let config = Attempt { try Config(parsing: text) }  // Attempt<Config, any Error>
    /// ```
    ///
    /// To run the work elsewhere, use ``init(upon:catching:file:line:)``; for async work, the
    /// initializer that takes an async closure.
    ///
    /// - Parameters:
    ///   - body: Computes the success, or throws the failure.
    ///   - file: Where the attempt is made, for ``PendingFutures``; leave the default.
    ///   - line: The line where the attempt is made; leave the default.
    @inlinable
    public init(catching body: () throws(Failure) -> Success, file: StaticString = #fileID, line: UInt = #line) {
        self.init(filledWith: Result(catching: body), file: file, line: line)
    }

    /// Starts `body` in a new task and returns an attempt that finishes with its result.
    ///
    /// ```swift
    /// let profile = Attempt { try await api.profile(id) }  // Attempt<Profile, any Error>
    /// ```
    ///
    /// Cancelling the attempt cancels the task; whatever the task returns afterwards changes
    /// nothing. The task inherits the caller's task-local values and, unless `priority` says
    /// otherwise, its priority, like `Task.init`.
    ///
    /// - Parameters:
    ///   - priority: The priority of the task; `nil` inherits it.
    ///   - body: The work; what it throws is the failure.
    ///   - file: Where the attempt is made, for ``PendingFutures``; leave the default.
    ///   - line: The line where the attempt is made; leave the default.
    public init(
        priority: TaskPriority? = nil,
        catching body: sending @escaping @isolated(any) () async throws(Failure) -> Success,
        file: StaticString = #fileID, line: UInt = #line
    ) {
        let node = AttemptNode<Success, Failure>(cancellation: nil)
        if PendingFutures.isRecording {
            PendingFutures.recordAttempt(node, file: file, line: line)
        }
        let task = Task(executorPreference: BridgeTasks.executor, priority: priority) {
            do throws(Failure) {
                node.decide(.success(try await body()))
            } catch {
                node.decide(.failure(error))
            }
        }
        node.onCancel { task.cancel() }
        self.init(node: node)
    }

    /// Runs `work` on `executor` and returns an attempt that finishes with its result; what it
    /// throws is the failure.
    ///
    /// ```swift
    /// let parsed = Attempt<Config, ConfigError>(upon: .global()) {
    ///     try Config(parsing: text)
    /// }
    /// ```
    ///
    /// If the attempt is cancelled before `work` starts, `work` never runs. Without an executor,
    /// `Attempt { ... }` runs the closure at once, like `Result(catching:)`.
    ///
    /// - Parameters:
    ///   - executor: Where `work` runs.
    ///   - work: Computes the success, or throws the failure.
    ///   - file: Where the attempt is made, for ``PendingFutures``; leave the default.
    ///   - line: The line where the attempt is made; leave the default.
    public init(
        upon executor: some Executor, catching work: @escaping @Sendable () throws(Failure) -> Success,
        file: StaticString = #fileID, line: UInt = #line
    ) {
        let guarded = DroppableCallback(AttemptNode<Success, Failure>(cancellation: nil))
        let node = guarded.node
        if PendingFutures.isRecording {
            PendingFutures.recordAttempt(node, file: file, line: line)
        }
        executor.submit {
            guarded.run { $0.runStep { Result(catching: work) } }
        }
        self.init(node: node)
    }

    /// Runs `work` on `executor` and returns an attempt that finishes with its result.
    @_documentation(visibility: internal)
    @available(*, deprecated, renamed: "init(upon:catching:)")
    public static func async(
        upon executor: some Executor = DispatchQueue.global(),
        execute work: @escaping @Sendable () throws(Failure) -> Success
    ) -> Attempt {
        Attempt(upon: executor, catching: work)
    }

    /// Creates an attempt that succeeds with `future`'s value.
    ///
    /// ```swift
    /// let name: Attempt<String, any Error> = Attempt(service.displayName(for: 7))
    /// ```
    ///
    /// A plain future cannot fail and has no work to stop: cancelling the attempt fails it with
    /// its cancellation error and ignores the value when it comes.
    ///
    /// - Parameter future: The future whose value the attempt succeeds with.
    public init(_ future: some FutureProtocol<Success>) {
        let node = AttemptNode<Success, Failure>(cancellation: nil)
        future.link(node, AttemptNode<Success, Failure>.succeedLinked)
        self.init(node: node)
    }

    /// Creates an attempt that finishes with the result that `future` is filled with.
    ///
    /// ```swift
    /// let login: Future<Result<Session, LoginError>> = legacyLogin()
    /// let attempt = Attempt(login)  // Attempt<Session, LoginError>
    /// ```
    ///
    /// Cancelling the attempt fails it with its cancellation error and ignores the result when
    /// it comes.
    ///
    /// - Parameter future: The future of the result.
    public init(_ future: some FutureProtocol<Result<Success, Failure>>) {
        let node = AttemptNode<Success, Failure>(cancellation: nil)
        future.link(node, AttemptNode<Success, Failure>.decideLinked)
        self.init(node: node)
    }
}
