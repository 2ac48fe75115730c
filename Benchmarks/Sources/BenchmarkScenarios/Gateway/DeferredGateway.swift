import Deferred
public import Dispatch

/// The gateway with Deferred: each backend call is a `DeferredAttempt` whose cancel handler
/// drops the call; the request is `allSucceeded`, `map` and `timeout`, with one callback.
public enum DeferredGateway {
    /// Runs every request of `run`, keeping its workload's number in flight, and returns once
    /// each has its answer.
    ///
    /// - Parameters:
    ///   - run: The requests and their counts.
    ///   - backends: The backends the requests call.
    ///   - timers: The queue that measures the time limits: concrete, as in a service's own code,
    ///     so that the library's inlinable operators are specialized for it.
    public static func serve(_ run: GatewayRun, backends: SimulatedBackends, timers: DispatchQueue) {
        for _ in 0..<run.workload.inFlight {
            guard let request = run.nextRequest() else {
                break
            }
            start(request, run, backends, timers)
        }
        run.waitUntilFinished()
    }

    private static func start(
        _ request: Int, _ run: GatewayRun, _ backends: SimulatedBackends, _ timers: DispatchQueue
    ) {
        let workload = run.workload
        var calls: [Attempt<Int, BenchFailure>] = []
        calls.reserveCapacity(workload.backends)
        for backend in 0..<workload.backends {
            calls.append(call(backend, for: request, run, backends))
        }
        calls.allSucceeded()
            .map(upon: .immediate, transform: combineReplies)
            .timeout(after: workload.timeout, upon: timers, failingWith: .timedOut)
            .upon(.immediate) { result in
                run.end(request, with: result)
                if let next = run.nextRequest() {
                    start(next, run, backends, timers)
                }
            }
    }

    private static func call(
        _ backend: Int, for request: Int, _ run: GatewayRun, _ backends: SimulatedBackends
    ) -> Attempt<Int, BenchFailure> {
        let writer = DeferredAttempt<Int, BenchFailure>()
        let latency = run.workload.latencyNanoseconds(request: request, backend: backend)
        let call = backends.call(after: latency) {
            writer.succeed(with: run.work(request: request, backend: backend))
        }
        writer.onCancel { backends.drop(call) }
        return writer.attempt
    }
}
