import Foundation
import Synchronization

/// The textbook future of 2014, as the baseline: one lock around an optional value and an
/// array of callbacks; waiting parks on a condition.
final class NaiveFuture<Value: Sendable>: Sendable {
    private struct State {
        var value: Value?
        var callbacks: [@Sendable (Value) -> Void] = []
    }

    private let state = Mutex(State())
    private let filled = NSCondition()

    /// Fills the future and runs the callbacks added so far; `false` if it was filled already.
    @discardableResult
    func fill(_ value: Value) -> Bool {
        let callbacks: [@Sendable (Value) -> Void]? = state.withLock { state in
            guard state.value == nil else {
                return nil
            }
            state.value = value
            defer { state.callbacks = [] }
            return state.callbacks
        }
        guard let callbacks else {
            return false
        }
        filled.lock()
        filled.broadcast()
        filled.unlock()
        for callback in callbacks {
            callback(value)
        }
        return true
    }

    /// Calls `callback` with the value, now if it is there, else when it is filled.
    func upon(_ callback: @escaping @Sendable (Value) -> Void) {
        let value: Value? = state.withLock { state in
            if state.value == nil {
                state.callbacks.append(callback)
            }
            return state.value
        }
        if let value {
            callback(value)
        }
    }

    /// Blocks until the future is filled.
    func wait() -> Value {
        filled.lock()
        defer { filled.unlock() }
        while true {
            if let value = state.withLock({ $0.value }) {
                return value
            }
            filled.wait()
        }
    }

    /// Blocks until the future is filled or `timeout` seconds pass.
    func wait(timeout: Double) -> Value? {
        let deadline = Date(timeIntervalSinceNow: timeout)
        filled.lock()
        defer { filled.unlock() }
        while true {
            if let value = state.withLock({ $0.value }) {
                return value
            }
            if !filled.wait(until: deadline) {
                return state.withLock { $0.value }
            }
        }
    }

    /// A future filled with `transform` of this one's value.
    func map<NewValue: Sendable>(_ transform: @escaping @Sendable (Value) -> NewValue) -> NaiveFuture<NewValue> {
        let mapped = NaiveFuture<NewValue>()
        upon { mapped.fill(transform($0)) }
        return mapped
    }

    /// A future filled with every value of `futures`, in order, once all are filled.
    static func all(_ futures: [NaiveFuture<Value>]) -> NaiveFuture<[Value]> {
        let joined = NaiveFuture<[Value]>()
        let remaining = Countdown(futures.count)
        for future in futures {
            future.upon { _ in
                if remaining.arrive() {
                    joined.fill(futures.map { $0.state.withLock { $0.value! } })
                }
            }
        }
        return joined
    }
}

/// Counts down from a number; tells the last arrival.
final class Countdown: Sendable {
    private let remaining: Atomic<Int>

    init(_ count: Int) {
        remaining = Atomic(count)
    }

    /// Counts one arrival; returns `true` for the last.
    func arrive() -> Bool {
        remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0
    }
}
