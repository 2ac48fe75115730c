public import Dispatch
import Synchronization

/// The process's ``SpinPolicy``, shared by every blocking wait.
///
/// Waits read it with one relaxed load and write it back only when it changes. Two waits that
/// update it at once may lose one update, which only delays the policy's learning by one wait.
@usableFromInline
internal enum BlockingWaitSpin {
    /// The policy, as its ``SpinPolicy/word``.
    private static let word = Atomic<UInt64>(SpinPolicy.initial.word)

    /// The current policy.
    @usableFromInline
    internal static var policy: SpinPolicy {
        SpinPolicy(word: word.load(ordering: .relaxed))
    }

    /// Records how a wait went, given the policy it started with.
    @usableFromInline
    internal static func record(_ outcome: SpinPolicy.Outcome, after policy: SpinPolicy) {
        let next = policy.after(outcome)
        if next != policy {
            word.store(next.word, ordering: .relaxed)
        }
    }

    /// Polls between two readings of the clock.
    @usableFromInline
    internal static var pollsPerClockReading: Int { 32 }
}

extension DeferredStorage {
    /// Blocks until the storage is published or `time` passes, for a storage that was not
    /// filled when the wait began; returns the value, or `nil` if the time passed or the storage
    /// was orphaned (see ``wait(until:)``).
    ///
    /// It polls the state word (no call per poll) as long as the process's ``SpinPolicy`` says,
    /// then sleeps. A wait with a deadline sleeps in the storage's ``WaiterRegistry``: if it
    /// times out, it gives up its place there and the registry drops it, so waits that time out
    /// leave nothing behind. A wait without one links its waiter to the storage directly.
    @usableFromInline
    internal final func waitUnfilled(until deadline: DispatchTime) -> Value? {
        // Dispatch reads the top bits of a time as its clock, and times out at once on a
        // deadline beyond 2^62 ns (146 years) that is not `.distantFuture`; such a deadline means
        // no deadline.
        let time = deadline.uptimeNanoseconds >= 1 << 62 ? .distantFuture : deadline
        let policy = BlockingWaitSpin.policy
        let start = DispatchTime.now().uptimeNanoseconds
        let poll = spinUntilFilled(from: start, until: policy.pollEnd(from: start, deadline: time.uptimeNanoseconds))
        switch poll {
        case .filled:
            BlockingWaitSpin.record(.caught, after: policy)
            return value.wrapped
        case .preempted:
            BlockingWaitSpin.record(.preempted, after: policy)
            if isFilled {
                return value.wrapped
            }
        case .timedOut:
            break
        }
        // Tells the policy how long the sleep since `asleep` took, unless the poll was preempted:
        // the policy has been told of that, and a second record from the same starting policy
        // would undo it.
        func recordSleep(since asleep: UInt64) {
            if poll != .preempted {
                BlockingWaitSpin.record(.slept(DispatchTime.now().uptimeNanoseconds &- asleep), after: policy)
            }
        }
        if time == .distantFuture {
            let waiter = BlockingWaiter<Value>()
            add(.link(waiter, BlockingWaiter<Value>.wake))
            BlockingWaitInTask.willSleep(waitingFor: Value.self)
            let asleep = DispatchTime.now().uptimeNanoseconds
            _ = waiter.sleep(until: .distantFuture)
            recordSleep(since: asleep)
            return value.wrapped
        }
        guard time > DispatchTime.now() else {
            return nil
        }
        guard let registry = waiters() else {
            return value.wrapped
        }
        let waiter = BlockingWaiter<Value>()
        guard registry.add(waiter) else {
            return value.wrapped
        }
        BlockingWaitInTask.willSleep(waitingFor: Value.self)
        let asleep = DispatchTime.now().uptimeNanoseconds
        if waiter.sleep(until: time) {
            recordSleep(since: asleep)
            return value.wrapped
        }
        registry.waiterGaveUp()
        return nil
    }

    /// How a poll ended.
    private enum Spin {
        /// The value is visible.
        case filled
        /// The poll reached its end.
        case timedOut
        /// The thread lost its core while it polled (see ``SpinPolicy/preemptionGap``).
        case preempted
    }

    /// Polls until the value is visible, the uptime clock reaches `end`, or the polling thread
    /// is found to have lost its core.
    private final func spinUntilFilled(from start: UInt64, until end: UInt64) -> Spin {
        var last = start
        repeat {
            for _ in 0..<BlockingWaitSpin.pollsPerClockReading {
                if StorageState(rawValue: state.load(ordering: .acquiring)).isFilled {
                    return .filled
                }
            }
            let now = DispatchTime.now().uptimeNanoseconds
            if now &- last > SpinPolicy.preemptionGap {
                return .preempted
            }
            last = now
        } while last < end
        return isFilled ? .filled : .timedOut
    }
}

/// Blocks until `peek` returns a value or `time` passes: the wait of futures that only offer
/// `upon` (the default of ``FutureProtocol/wait(until:)``).
///
/// It polls as long as the process's ``SpinPolicy`` says, then asks `notify` to signal a semaphore
/// once the value exists and sleeps on it. What `notify` registers stays with the future until
/// the value arrives, since such a future offers no way to remove it.
@usableFromInline
internal func blockingWait<Value>(
    until time: DispatchTime,
    peek: () -> Value?,
    notify: (_ signal: @escaping @Sendable () -> Void) -> Void
) -> Value? {
    if let value = peek() {
        return value
    }
    let start = DispatchTime.now().uptimeNanoseconds
    let end = BlockingWaitSpin.policy.pollEnd(from: start, deadline: time.uptimeNanoseconds)
    repeat {
        if let value = peek() {
            return value
        }
    } while DispatchTime.now().uptimeNanoseconds < end
    guard time > DispatchTime.now() else {
        return peek()
    }
    let filled = DispatchSemaphore(value: 0)
    notify { filled.signal() }
    BlockingWaitInTask.willSleep(waitingFor: Value.self)
    _ = filled.wait(timeout: time)
    return peek()
}

/// Sleeps until `time`: the wait on a future that is never filled.
@usableFromInline
internal func sleepWithoutValue<Value>(until time: DispatchTime) -> Value? {
    if time > DispatchTime.now() {
        BlockingWaitInTask.willSleep(waitingFor: Value.self)
    }
    _ = DispatchSemaphore(value: 0).wait(timeout: time)
    return nil
}
