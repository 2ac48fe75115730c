import Synchronization

/// The gateway with async/await: a task per request slot; each request is a throwing task group
/// with a child per backend and a child that throws at the time limit; a backend call is a
/// continuation whose task cancellation handler drops the call.
public enum AsyncGateway {
    /// Runs every request of `run`, keeping its workload's number in flight, and returns once
    /// each has its answer.
    public static func serve(_ run: GatewayRun, backends: SimulatedBackends) {
        let slots = run.workload.inFlight
        Task {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<slots {
                    group.addTask {
                        while let request = run.nextRequest() {
                            await answer(request, run, backends)
                        }
                    }
                }
            }
        }
        run.waitUntilFinished()
    }

    private static func answer(_ request: Int, _ run: GatewayRun, _ backends: SimulatedBackends) async {
        let workload = run.workload
        do {
            let reply = try await withThrowingTaskGroup(of: Int.self) { group in
                for backend in 0..<workload.backends {
                    group.addTask { try await call(backend, for: request, run, backends) }
                }
                group.addTask {
                    try await Task.sleep(for: workload.timeout)
                    throw BenchFailure.timedOut
                }
                var replies: [Int] = []
                replies.reserveCapacity(workload.backends)
                do {
                    while replies.count < workload.backends, let reply = try await group.next() {
                        replies.append(reply)
                    }
                } catch {
                    run.giveUp(request)
                    throw error
                }
                group.cancelAll()
                return combineReplies(replies)
            }
            run.finish(request, reply: reply)
        } catch {
            run.finish(request, reply: nil)
        }
    }

    private static func call(
        _ backend: Int, for request: Int, _ run: GatewayRun, _ backends: SimulatedBackends
    ) async throws -> Int {
        let pending = PendingCall()
        let latency = run.workload.latencyNanoseconds(request: request, backend: backend)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let call = backends.call(after: latency) {
                    let reply = run.work(request: request, backend: backend)
                    pending.finish()?.resume(returning: reply)
                }
                if !pending.start(call, continuation) {
                    backends.drop(call)
                    continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            if let (call, continuation) = pending.cancel() {
                backends.drop(call)
                continuation.resume(throwing: CancellationError())
            }
        }
    }
}

/// A backend call awaited by a task, and whichever of its reply and its task's cancellation
/// comes first.
private final class PendingCall: Sendable {
    private enum State {
        case idle
        case calling(SimulatedBackends.Call, CheckedContinuation<Int, any Error>)
        case over
    }

    private let state = Mutex(State.idle)

    /// Records the call and its continuation; `false` if the task was cancelled first.
    func start(_ call: SimulatedBackends.Call, _ continuation: CheckedContinuation<Int, any Error>) -> Bool {
        state.withLock { state in
            guard case .idle = state else {
                return false
            }
            state = .calling(call, continuation)
            return true
        }
    }

    /// Takes the continuation for the reply, unless the task was cancelled first.
    func finish() -> CheckedContinuation<Int, any Error>? {
        state.withLock { state in
            guard case .calling(_, let continuation) = state else {
                return nil
            }
            state = .over
            return continuation
        }
    }

    /// Takes the call and continuation for a cancellation, unless the reply came first.
    func cancel() -> (SimulatedBackends.Call, CheckedContinuation<Int, any Error>)? {
        state.withLock { state in
            switch state {
            case .idle:
                state = .over
                return nil
            case .calling(let call, let continuation):
                state = .over
                return (call, continuation)
            case .over:
                return nil
            }
        }
    }
}
