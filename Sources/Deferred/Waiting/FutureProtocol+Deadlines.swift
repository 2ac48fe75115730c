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
    /// - Parameter timeout: How long to wait at most.
    /// - Returns: The value, or `nil` if `timeout` passed first.
    @available(
        *, noasync, message: "wait(for:) blocks the thread; use 'await future.value' or 'try await future.get()'"
    )
    public func wait(for timeout: Duration) -> Value? {
        wait(until: .now() + .nanoseconds(timeout.clampedNanoseconds))
    }

    /// Blocks until the future is filled or the continuous clock reaches `deadline`.
    ///
    /// ```swift
    /// let deadline = ContinuousClock.now + .seconds(5)
    /// let first = one.wait(until: deadline)
    /// let second = two.wait(until: deadline)  // both within the same five seconds
    /// ```
    ///
    /// - Parameter deadline: The latest instant to wait until.
    /// - Returns: The value, or `nil` if `deadline` passed first.
    @available(
        *, noasync, message: "wait(until:) blocks the thread; use 'await future.value' or 'try await future.get()'"
    )
    public func wait(until deadline: ContinuousClock.Instant) -> Value? {
        wait(for: ContinuousClock.now.duration(to: deadline))
    }
}
