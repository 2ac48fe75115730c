public import Synchronization

extension FutureProtocol {
    /// Returns a future filled with a tuple of this future's value and the others' values,
    /// once all of them are filled.
    ///
    /// The futures may have different value types, and any number of them may be joined:
    ///
    /// ```swift
    /// let profile = name.and(age, avatar)  // Future<(String, Int, Image)>
    /// profile.upon(.main) { name, age, avatar in show(name, age, avatar) }
    /// ```
    ///
    /// The joined future holds no reference to the inputs, so dropping it while they are
    /// pending leaks nothing.
    ///
    /// - Parameter others: The futures to join with this one.
    /// - Returns: A read-only future of all the values, in argument order.
    @inlinable
    public func and<each Other: FutureProtocol>(
        _ others: repeat each Other
    ) -> Future<(Value, repeat (each Other).Value)> {
        // Each input delivers into a private copy, so that the joined result refers to the
        // copies and never to the inputs, whose handlers refer to the result.
        var inputs = 1
        for _ in repeat each others {
            inputs += 1
        }
        let joined = Deferred<(Value, repeat (each Other).Value)>()
        let first = Deferred<Value>()
        let rest = (repeat copySlot(for: each others))
        let countdown = Countdown(inputs) {
            joined.fill(with: (first.peek().unsafelyUnwrapped, repeat (each rest).peek().unsafelyUnwrapped))
        }
        deliver(self, into: first, countdown)
        repeat deliver(each others, into: each rest, countdown)
        return Future(joined)
    }
}

/// Calls `finish` once `arrive()` has been called a given number of times.
@usableFromInline
internal final class Countdown: Sendable {
    @usableFromInline
    internal let remaining: Atomic<Int>

    @usableFromInline
    internal let finish: @Sendable () -> Void

    @inlinable
    internal init(_ count: Int, finish: @escaping @Sendable () -> Void) {
        remaining = Atomic(count)
        self.finish = finish
    }

    /// Counts one arrival, and returns whether it was the last.
    ///
    /// The last arrival calls `finish` before returning.
    @inlinable
    @discardableResult
    internal func arrive() -> Bool {
        guard remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 else {
            return false
        }
        finish()
        return true
    }
}

/// An unfilled deferred of the same value type as `future`, to copy its value into.
@inlinable
internal func copySlot<Source: FutureProtocol>(for future: Source) -> Deferred<Source.Value> {
    Deferred()
}

/// Copies `future`'s value into `copy` in place, then counts the arrival.
@inlinable
internal func deliver<Source: FutureProtocol>(
    _ future: Source,
    into copy: Deferred<Source.Value>,
    _ countdown: Countdown
) {
    future.upon(ImmediateExecutor.shared) { value in
        copy.fill(with: value)
        countdown.arrive()
    }
}
