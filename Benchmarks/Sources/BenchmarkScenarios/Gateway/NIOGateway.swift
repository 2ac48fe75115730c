public import NIOCore
import NIOPosix

/// The gateway with swift-nio: each backend call completes an `EventLoopPromise`; the request is
/// `whenAllSucceed`, `map`, and a scheduled task that fails it at the time limit and is cancelled
/// when the answer comes first.
///
/// `EventLoopFuture` has no cancellation, so a backend call goes on after its request timed out.
public enum NIOGateway {
    /// Runs every request of `run` on `group`'s loops, keeping its workload's number in flight,
    /// and returns once each has its answer.
    public static func serve(_ run: GatewayRun, backends: SimulatedBackends, group: any EventLoopGroup) {
        for _ in 0..<run.workload.inFlight {
            guard let request = run.nextRequest() else {
                break
            }
            let loop = group.next()
            loop.execute { start(request, run, backends, group, on: loop) }
        }
        run.waitUntilFinished()
    }

    private static func start(
        _ request: Int, _ run: GatewayRun, _ backends: SimulatedBackends, _ group: any EventLoopGroup,
        on loop: any EventLoop
    ) {
        let workload = run.workload
        var calls: [EventLoopFuture<Int>] = []
        calls.reserveCapacity(workload.backends)
        for backend in 0..<workload.backends {
            let promise = loop.makePromise(of: Int.self)
            _ = backends.call(after: workload.latencyNanoseconds(request: request, backend: backend)) {
                promise.succeed(run.work(request: request, backend: backend))
            }
            calls.append(promise.futureResult)
        }
        let answer = loop.makePromise(of: Int.self)
        let limit = loop.scheduleTask(in: .nanoseconds(Int64(workload.timeoutNanoseconds))) {
            answer.fail(BenchFailure.timedOut)
        }
        EventLoopFuture.whenAllSucceed(calls, on: loop).map(combineReplies).cascade(to: answer)
        answer.futureResult.whenComplete { result in
            limit.cancel()
            run.end(request, with: result)
            if let next = run.nextRequest() {
                start(next, run, backends, group, on: loop)
            }
        }
    }
}
