public import Dispatch
import Synchronization

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

extension DeferredStorage {
    /// Traps if waiting for this unfilled storage from the calling code could never succeed,
    /// because the executor that must fill it is a serial one that the wait itself occupies.
    ///
    /// The check is exact rather than a guess: it fires only when the executor reports that
    /// the caller keeps it from running anything else. A map's executor never changes after the
    /// storage is made, so reading it races with nothing.
    @usableFromInline
    internal final func checkWaitCanSucceed() {
        guard let executor = fillingExecutor as? any SerialExecutorIdentity, executor.isBlockedByCaller else {
            return
        }
        preconditionFailure(
            """
            wait(until:) on a future of \(Value.self) can never return its value: a map on \
            \(type(of: executor)) computes it, and this wait blocks that executor, so the \
            transform cannot start until the wait ends. Use upon(_:execute:) or await, or wait \
            on another thread.
            """
        )
    }
}

/// Debug builds' warning when a blocking wait blocks the thread of a Swift task, off the main
/// thread.
///
/// Such a thread belongs to a pool that other tasks need: the cooperative pool, which never grows
/// past the number of cores, or Dispatch's global queues, which add a thread only after a while
/// (about a second on Linux). A wait there can take far longer than the value does, and stall
/// every other task meanwhile. The warning is printed once per call site, only when the wait
/// really sleeps (not when the value is already there or comes during the brief poll), and
/// never on the main thread, where blocking is the caller's own business.
///
/// ``FutureProtocol/wait(for:file:line:)`` and ``FutureProtocol/wait(until:file:line:)`` name
/// their call site; the `DispatchTime` form, a protocol requirement, cannot take one, and the
/// warning says so.
internal enum BlockingWaitInTask {
    /// Where a blocking wait was called.
    struct CallSite: Hashable, Sendable, CustomStringConvertible {
        let file: String
        let line: UInt

        var description: String { "\(file):\(line)" }
    }

    /// The call site of the wait that runs in this task, set by the waits that know it.
    @TaskLocal static var callSite: CallSite?

    /// Whether this build checks: debug builds of the library.
    static var isChecking: Bool { _isDebugAssertConfiguration() }

    /// The call sites already reported, and whether the unknown one was.
    private static let reported = QueueLocked<Set<CallSite?>>([], label: "Deferred.BlockingWaitInTask")

    /// Runs `wait` with `file` and `line` as the call site of any wait inside it, when this
    /// build checks and the caller is a task.
    static func at<Value>(_ file: StaticString, _ line: UInt, _ wait: () -> Value) -> Value {
        guard isChecking, withUnsafeCurrentTask(body: { $0 != nil }) else {
            return wait()
        }
        return $callSite.withValue(CallSite(file: "\(file)", line: line), operation: wait)
    }

    /// Reports a wait on a future of `valueType` that is about to sleep, if it blocks a task's
    /// thread off the main thread and its call site has not been reported yet.
    static func willSleep(waitingFor valueType: Any.Type) {
        guard isChecking, withUnsafeCurrentTask(body: { $0 != nil }), !DispatchQueue.isRunningMainQueue else {
            return
        }
        let site = callSite
        guard reported.sync({ $0.insert(site).inserted }) else {
            return
        }
        let place =
            if let site { "at \(site)" } else {
                "at an unknown call site (wait(for:) and wait(until:) with a ContinuousClock instant name theirs)"
            }
        // The standard output, like every report of this module (it imports no C library).
        print(
            """
            Deferred: warning: a blocking wait for \(valueType) \(place) blocked the thread of a \
            Swift task. Other tasks need that thread: the wait can take far longer than the value \
            (Dispatch adds a thread only after about a second) and stalls them meanwhile. In async \
            code, use 'await future.value' or 'try await attempt.get()'. (Reported once per call \
            site, in debug builds.)
            """)
    }
}
