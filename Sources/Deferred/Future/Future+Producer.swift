extension Future {
    /// Creates a future and calls `body` at once with the deferred that fills it, for work that
    /// reports its result through a callback.
    ///
    /// ```swift
    /// let reply = Future<Data> { deferred in
    ///     legacyClient.fetch(url) { data in deferred.fill(with: data) }
    /// }
    /// ```
    ///
    /// `body` runs once, on the calling thread, before the initializer returns; the future is
    /// read-only to everybody else. The first fill counts, as for any ``Deferred``.
    ///
    /// It is for work that reports through a callback. To go on from another future, use
    /// ``FutureProtocol/map(upon:transform:)`` or ``FutureProtocol/andThen(upon:start:)``: a
    /// chain of producers that each fill from another future's `upon` handler fills and is
    /// released recursively, one stack frame per link, where those combinators use a loop.
    ///
    /// - Parameters:
    ///   - file: Where the future is made, for ``PendingFutures``; leave the default.
    ///   - line: The line where the future is made; leave the default.
    ///   - body: Starts the work, and fills the deferred when it is done.
    public init(file: StaticString = #fileID, line: UInt = #line, _ body: (_ deferred: Deferred<Value>) -> Void) {
        let deferred = Deferred<Value>(file: file, line: line)
        body(deferred)
        self.init(deferred)
    }

    /// Creates a future that is filled with `value` once `delay` has passed.
    ///
    /// ```swift
    /// let later = Future(filledWith: "tick", after: .seconds(1), upon: DispatchQueue.global())
    /// ```
    ///
    /// It is `Future(filledWith: value).delay(by: delay, upon: executor)`.
    ///
    /// - Parameters:
    ///   - value: The value every reader sees.
    ///   - delay: How long to wait first.
    ///   - executor: The executor that measures the delay and fills the future.
    public init(filledWith value: Value, after delay: Duration, upon executor: some SchedulingExecutor) {
        self = Future(filledWith: value).delay(by: delay, upon: executor)
    }
}

extension Deferred {
    /// Fills this deferred of a result with a success.
    ///
    /// ```swift
    /// let login = Deferred<Result<Session, LoginError>>()
    /// login.succeed(with: session)
    /// ```
    ///
    /// - Parameter value: The success.
    /// - Returns: `true` if this call filled the deferred, `false` if it was already filled.
    @discardableResult
    public func succeed<Success, Failure>(with value: Success) -> Bool where Value == Result<Success, Failure> {
        fill(with: .success(value))
    }

    /// Fills this deferred of a result with a failure.
    ///
    /// - Parameter error: The failure.
    /// - Returns: `true` if this call filled the deferred, `false` if it was already filled.
    @discardableResult
    public func fail<Success, Failure>(with error: Failure) -> Bool where Value == Result<Success, Failure> {
        fill(with: .failure(error))
    }
}
