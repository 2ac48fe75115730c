import Deferred
public import DeferredExecutors

/// The gateway with Deferred on a `LoopGroup`, the server configuration: each request is pinned
/// to one loop, which keeps its time limit in the loop's own timer heap and runs it there; the
/// next request keeps the same loop.
///
/// The same graph as ``DeferredGateway``'s (`allSucceeded`, `map`, `timeout`, one callback).
/// Unlike ``NIOGateway``, whose promises must take each reply onto their loop, a reply completes
/// its attempt on the thread it arrives on: Deferred's nodes are safe from any thread, so nothing
/// needs the hop (taking each reply onto the loop cost about 40 % more processor time per
/// request at 10 in flight, measured).
public enum LoopGateway {
    /// Runs every request of `run` on `loops`, keeping its workload's number in flight, and
    /// returns once each has its answer.
    public static func serve(_ run: GatewayRun, backends: SimulatedBackends, loops: LoopGroup) {
        for _ in 0..<run.workload.inFlight {
            guard let request = run.nextRequest() else {
                break
            }
            let loop = loops.next()
            loop.submit { start(request, run, backends, on: loop) }
        }
        run.waitUntilFinished()
    }

    private static func start(_ request: Int, _ run: GatewayRun, _ backends: SimulatedBackends, on loop: LoopExecutor) {
        let workload = run.workload
        var calls: [Attempt<Int, BenchFailure>] = []
        calls.reserveCapacity(workload.backends)
        for backend in 0..<workload.backends {
            let writer = DeferredAttempt<Int, BenchFailure>()
            let latency = workload.latencyNanoseconds(request: request, backend: backend)
            let call = backends.call(after: latency) {
                writer.succeed(with: run.work(request: request, backend: backend))
            }
            writer.onCancel { backends.drop(call) }
            calls.append(writer.attempt)
        }
        calls.allSucceeded()
            .map(upon: .immediate, transform: combineReplies)
            .timeout(after: workload.timeout, upon: loop, failingWith: .timedOut)
            .upon(.immediate) { result in
                run.end(request, with: result)
                if let next = run.nextRequest() {
                    start(next, run, backends, on: loop)
                }
            }
    }
}
