import Deferred
public import Dispatch

/// The gateway with Deferred: each backend call is a `DeferredAttempt` whose cancel handler
/// drops the call; the request is `allSucceeded`, `map` and `timeout`, with one callback.
///
/// With `deadlines`, the request is `allSucceeded`, `map` and `deadline(at:)` instead, and each
/// backend learns its request's deadline from its writer (`onDeadlineChange`) and stops by
/// itself when it passes, as a backend told its caller's budget over the wire does.
public enum DeferredGateway {
    /// Runs every request of `run`, keeping its workload's number in flight, and returns once
    /// each has its answer.
    ///
    /// - Parameters:
    ///   - run: The requests and their counts.
    ///   - backends: The backends the requests call.
    ///   - timers: The queue that measures the time limits: concrete, as in a service's own code,
    ///     so that the library's inlinable operators are specialized for it.
    ///   - deadlines: Whether each request runs under a deadline its backends learn, instead of
    ///     a time limit.
    public static func serve(
        _ run: GatewayRun, backends: SimulatedBackends, timers: DispatchQueue, deadlines: Bool = false
    ) {
        for _ in 0..<run.workload.inFlight {
            guard let request = run.nextRequest() else {
                break
            }
            start(request, run, backends, timers, deadlines)
        }
        run.waitUntilFinished()
    }

    private static func start(
        _ request: Int, _ run: GatewayRun, _ backends: SimulatedBackends, _ timers: DispatchQueue, _ deadlines: Bool
    ) {
        let workload = run.workload
        var calls: [Attempt<Int, BenchFailure>] = []
        calls.reserveCapacity(workload.backends)
        for backend in 0..<workload.backends {
            calls.append(call(backend, for: request, run, backends, deadlines))
        }
        let joined = calls.allSucceeded().map(upon: .immediate, transform: combineReplies)
        let limited =
            deadlines
            ? joined.deadline(at: .now + workload.timeout, failingWith: .timedOut)
            : joined.timeout(after: workload.timeout, upon: timers, failingWith: .timedOut)
        limited.upon(.immediate) { result in
            run.end(request, with: result)
            if let next = run.nextRequest() {
                start(next, run, backends, timers, deadlines)
            }
        }
    }

    private static func call(
        _ backend: Int, for request: Int, _ run: GatewayRun, _ backends: SimulatedBackends, _ deadlines: Bool
    ) -> Attempt<Int, BenchFailure> {
        let writer = DeferredAttempt<Int, BenchFailure>()
        let latency = run.workload.latencyNanoseconds(request: request, backend: backend)
        let call = backends.call(after: latency) {
            writer.succeed(with: run.work(request: request, backend: backend))
        }
        writer.onCancel { backends.drop(call) }
        if deadlines {
            writer.onDeadlineChange { deadline in
                if let deadline {
                    backends.stop(call, at: deadline)
                }
            }
        }
        return writer.attempt
    }
}
