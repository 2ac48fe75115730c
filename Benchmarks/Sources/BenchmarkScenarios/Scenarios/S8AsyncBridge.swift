import Deferred
import Dispatch
import NIOCore

extension Scenario {
    /// S8: a task awaits, again and again, a future that another thread fills.
    ///
    /// OpenCombine sits this one out: its promise is a closure that is not `Sendable`, so
    /// handing it to the filling thread would take an unchecked wrapper.
    static let asyncBridge = Scenario(
        id: "S8",
        title: "await a future",
        operation: "op",
        unit: .nanoseconds,
        fullSize: 100_000,
        quickSize: 1_000,
        trials: [
            .deferred: { count in
                Trial {
                    runBlocking {
                        for index in 0..<count {
                            let deferred = Deferred<Int>()
                            fillingQueue.async { deferred.fill(with: index) }
                            consume(await deferred.value)
                        }
                    }
                }
            },
            .continuation: { count in
                Trial {
                    runBlocking {
                        for index in 0..<count {
                            let value = await withCheckedContinuation { continuation in
                                fillingQueue.async { continuation.resume(returning: index) }
                            }
                            consume(value)
                        }
                    }
                }
            },
            .nio: { count in
                Trial {
                    runBlocking {
                        for index in 0..<count {
                            let promise = nioLoop.makePromise(of: Int.self)
                            fillingQueue.async { promise.succeed(index) }
                            consume((try? await promise.futureResult.get()) ?? 0)
                        }
                    }
                }
            },
            .naive: { count in
                Trial {
                    runBlocking {
                        for index in 0..<count {
                            let future = NaiveFuture<Int>()
                            fillingQueue.async { future.fill(index) }
                            let value = await withCheckedContinuation { continuation in
                                future.upon { continuation.resume(returning: $0) }
                            }
                            consume(value)
                        }
                    }
                }
            },
        ]
    )
}
