import Dispatch

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
