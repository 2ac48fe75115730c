import Dispatch

extension FutureProtocol {
    /// Blocks until the future is filled or `timeout` has passed.
    ///
    /// ```swift
    /// if let reply = request.wait(for: .seconds(2)) { print(reply) }
    /// ```
    ///
    /// The same wait as ``wait(until:)-(DispatchTime)``, with the limit given as a `Duration`
    /// like every other time in this library. It is measured on the uptime clock; zero or a
    /// negative duration only looks.
    ///
    /// Debug builds print a warning, once per call site, when the wait blocks the thread of a
    /// Swift task off the main thread: that thread belongs to a pool other tasks need. In async
    /// code, `await` the value instead.
    ///
    /// - Parameters:
    ///   - timeout: How long to wait at most.
    ///   - file: The call site, for the debug warning; leave the default.
    ///   - line: The call site's line; leave the default.
    /// - Returns: The value, or `nil` if `timeout` passed first.
    @available(
        *, noasync, message: "wait(for:) blocks the thread; use 'await future.value' or 'try await future.get()'"
    )
    public func wait(for timeout: Duration, file: StaticString = #fileID, line: UInt = #line) -> Value? {
        let deadline = DispatchTime.now() + .nanoseconds(timeout.clampedNanoseconds)
        return BlockingWaitInTask.at(file, line) { wait(until: deadline) }
    }

    /// Blocks until the future is filled or the continuous clock reaches `deadline`.
    ///
    /// ```swift
    /// let deadline = ContinuousClock.now + .seconds(5)
    /// let first = one.wait(until: deadline)
    /// let second = two.wait(until: deadline)  // both within the same five seconds
    /// ```
    ///
    /// Debug builds warn, once per call site, when the wait blocks the thread of a Swift task off
    /// the main thread, as ``wait(for:file:line:)`` does.
    ///
    /// - Parameters:
    ///   - deadline: The latest instant to wait until.
    ///   - file: The call site, for the debug warning; leave the default.
    ///   - line: The call site's line; leave the default.
    /// - Returns: The value, or `nil` if `deadline` passed first.
    @available(
        *, noasync, message: "wait(until:) blocks the thread; use 'await future.value' or 'try await future.get()'"
    )
    public func wait(until deadline: ContinuousClock.Instant, file: StaticString = #fileID, line: UInt = #line)
        -> Value?
    {
        wait(for: ContinuousClock.now.duration(to: deadline), file: file, line: line)
    }
}
