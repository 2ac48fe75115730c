import Deferred
import Dispatch
import NIOCore
import NIOEmbedded

extension Scenario {
    /// S17: one request of the gateway, without its backends or clock: three pending producers
    /// (each with a cancel handler), their join, a `map`, a time limit on a Dispatch queue that
    /// the answer beats, and one callback; then the three replies.
    static let gatewayGraph = Scenario(
        id: "S17",
        title: "gateway request: 3 producers, join, map, limit, callback",
        operation: "request",
        unit: .nanoseconds,
        fullSize: 200_000,
        quickSize: 5_000,
        trials: [
            .deferred: { count in
                let timers = DispatchQueue.global()
                return Trial {
                    for _ in 0..<count {
                        let first = DeferredAttempt<Int, BenchFailure>()
                        let second = DeferredAttempt<Int, BenchFailure>()
                        let third = DeferredAttempt<Int, BenchFailure>()
                        first.onCancel(cancelled)
                        second.onCancel(cancelled)
                        third.onCancel(cancelled)
                        [first.attempt, second.attempt, third.attempt].allSucceeded()
                            .map(upon: .immediate, transform: combineReplies)
                            .timeout(after: .seconds(60), upon: timers, failingWith: .timedOut)
                            .upon(.immediate, execute: consumeReply)
                        first.succeed(with: 1)
                        second.succeed(with: 2)
                        third.succeed(with: 3)
                    }
                }
            },
            .nio: { count in
                let loop = EmbeddedEventLoop()
                return Trial {
                    for _ in 0..<count {
                        let first = loop.makePromise(of: Int.self)
                        let second = loop.makePromise(of: Int.self)
                        let third = loop.makePromise(of: Int.self)
                        let answer = loop.makePromise(of: Int.self)
                        let limit = loop.scheduleTask(in: .seconds(60)) { answer.fail(BenchFailure.timedOut) }
                        EventLoopFuture.whenAllSucceed(
                            [first.futureResult, second.futureResult, third.futureResult], on: loop
                        )
                        .map(combineReplies).cascade(to: answer)
                        answer.futureResult.whenComplete { result in
                            limit.cancel()
                            consumeReply(result.mapError { _ in BenchFailure.timedOut })
                        }
                        first.succeed(1)
                        second.succeed(2)
                        third.succeed(3)
                    }
                }
            },
        ]
    )

    /// S19: S17's request under its caller's deadline instead of a time limit.
    ///
    /// The deadline travels up to the three producers (each producer's attempt is tracked by the
    /// deadline ledger), which could read it to pass it on. The peer is S17's: NIO's request
    /// graph with a scheduled task at the deadline.
    static let gatewayGraphUnderDeadline = Scenario(
        id: "S19",
        title: "gateway request under a deadline: 3 producers, join, map, deadline, callback",
        operation: "request",
        unit: .nanoseconds,
        fullSize: 200_000,
        quickSize: 5_000,
        trials: [
            .deferred: { count in
                Trial {
                    for _ in 0..<count {
                        let first = DeferredAttempt<Int, BenchFailure>()
                        let second = DeferredAttempt<Int, BenchFailure>()
                        let third = DeferredAttempt<Int, BenchFailure>()
                        first.onCancel(cancelled)
                        second.onCancel(cancelled)
                        third.onCancel(cancelled)
                        [first.attempt, second.attempt, third.attempt].allSucceeded()
                            .map(upon: .immediate, transform: combineReplies)
                            .deadline(at: .now + .seconds(60), failingWith: .timedOut)
                            .upon(.immediate, execute: consumeReply)
                        first.succeed(with: 1)
                        second.succeed(with: 2)
                        third.succeed(with: 3)
                    }
                }
            },
            .nio: gatewayGraph.trials[.nio]!,
        ]
    )

    /// S18: a time limit armed on a long deadline and withdrawn when its attempt finishes first,
    /// as most limits of a busy service are (peer: a scheduled task cancelled on NIO's loop).
    static let timeoutWithdrawn = Scenario(
        id: "S18",
        title: "a time limit armed, then beaten",
        operation: "limit",
        unit: .nanoseconds,
        fullSize: 1_000_000,
        quickSize: 10_000,
        trials: [
            .deferred: { count in
                let timers = DispatchQueue.global()
                return Trial {
                    for index in 0..<count {
                        let writer = DeferredAttempt<Int, BenchFailure>()
                        writer.attempt.timeout(after: .seconds(60), upon: timers, failingWith: .timedOut)
                            .uponSuccess(.immediate, execute: consume)
                        writer.succeed(with: index)
                    }
                }
            },
            .nio: { count in
                Trial {
                    // On the loop's own thread, where NIO schedules without a hop.
                    try? nioLoop.submit {
                        for index in 0..<count {
                            let promise = nioLoop.makePromise(of: Int.self)
                            let limit = nioLoop.scheduleTask(in: .seconds(60)) {
                                promise.fail(BenchFailure.timedOut)
                            }
                            promise.futureResult.whenSuccess { value in
                                limit.cancel()
                                consume(value)
                            }
                            promise.succeed(index)
                        }
                    }.wait()
                }
            },
        ]
    )
}

/// A producer's cancel handler that captures nothing.
@Sendable private func cancelled() {
    consume(-1)
}

/// The gateway's callback, capturing nothing.
@Sendable private func consumeReply(_ result: Result<Int, BenchFailure>) {
    if case .success(let reply) = result {
        consume(reply)
    }
}
