extension Deferred {
    /// Creates an unfilled deferred named `label` for ``PendingFutures``: its dumps and reports
    /// show the name beside the type and the place it was made.
    ///
    /// ```swift
    /// let profile = Deferred<Profile>(named: "profile \(id)")
    /// ```
    ///
    /// The name is kept only while ``PendingFutures`` records (``PendingFutures/isTracking``
    /// is on, or a ``PendingFutures/madeDuring(_:)-(()->Result)`` is running); otherwise naming
    /// costs a relaxed atomic load, and the deferred is the same as ``init(file:line:)``'s.
    ///
    /// - Parameters:
    ///   - label: A short name, such as `"profile 42"`.
    ///   - file: Where the deferred is made, for ``PendingFutures``; leave the default.
    ///   - line: The line where the deferred is made; leave the default.
    public init(named label: String, file: StaticString = #fileID, line: UInt = #line) {
        self.init(file: file, line: line)
        name(backing.trackedStorage, label)
    }

    /// Names this deferred `label` for ``PendingFutures`` and returns it; see
    /// ``init(named:file:line:)``.
    ///
    /// - Parameter label: A short name, such as `"profile 42"`.
    /// - Returns: This deferred.
    public func named(_ label: String) -> Deferred<Value> {
        name(backing.trackedStorage, label)
        return self
    }
}

extension Future {
    /// Names this future `label` for ``PendingFutures`` and returns it: dumps and reports show the
    /// name beside the stage that made it, such as `map "avatar"`.
    ///
    /// A future with no storage of its own (filled from the start, or a view of another kind of
    /// future) keeps no name. The name is kept only while ``PendingFutures`` records; otherwise
    /// naming costs a relaxed atomic load.
    ///
    /// - Parameter label: A short name, such as `"avatar"`.
    /// - Returns: This future.
    public func named(_ label: String) -> Future<Value> {
        name(backing.trackedStorage, label)
        return self
    }
}

extension Attempt {
    /// Names this attempt `label` for ``PendingFutures`` and returns it: dumps and reports show
    /// the name beside the stage or writer that made it, such as `timeout(2.0 seconds) "search"`.
    ///
    /// The name is kept only while ``PendingFutures`` records; otherwise naming costs a relaxed
    /// atomic load.
    ///
    /// - Parameter label: A short name, such as `"search"`.
    /// - Returns: This attempt.
    public func named(_ label: String) -> Attempt<Success, Failure> {
        name(node, label)
        return self
    }
}

/// Names `storage`, if there is one, when ``PendingFutures`` records.
private func name(_ storage: (any TrackedFuture)?, _ label: String) {
    if let storage, PendingFutures.isRecording {
        PendingFutures.name(storage, label)
    }
}
