import Deferred
import NIOCore
import NIOEmbedded
@preconcurrency import OpenCombine

extension Scenario {
    /// The handlers on each future in S3.
    static let fanOutWidth = 100

    /// S3: one future, a hundred inline handlers, then the fill; over many futures.
    static let fanOut = Scenario(
        id: "S3",
        title: "fan-out, 100 handlers",
        operation: "handler",
        unit: .nanoseconds,
        fullSize: 1_000_000,
        quickSize: 10_000,
        trials: [
            .deferred: { count in
                Trial {
                    for index in 0..<count / fanOutWidth {
                        let deferred = Deferred::Deferred<Int>()
                        for _ in 0..<fanOutWidth {
                            deferred.upon(.immediate, execute: consume)
                        }
                        deferred.fill(with: index)
                    }
                }
            },
            .nio: { count in
                let loop = EmbeddedEventLoop()
                return Trial {
                    for index in 0..<count / fanOutWidth {
                        let promise = loop.makePromise(of: Int.self)
                        for _ in 0..<fanOutWidth {
                            promise.futureResult.whenSuccess(consume)
                        }
                        promise.succeed(index)
                    }
                }
            },
            .combine: { count in
                Trial {
                    var subscriptions: [AnyCancellable] = []
                    subscriptions.reserveCapacity(fanOutWidth)
                    for index in 0..<count / fanOutWidth {
                        let (future, promise) = makeCombineFuture()
                        for _ in 0..<fanOutWidth {
                            subscriptions.append(future.sink(receiveValue: consume))
                        }
                        promise(.success(index))
                        subscriptions.removeAll(keepingCapacity: true)
                    }
                }
            },
            .naive: { count in
                Trial {
                    for index in 0..<count / fanOutWidth {
                        let future = NaiveFuture<Int>()
                        for _ in 0..<fanOutWidth {
                            future.upon(consume)
                        }
                        future.fill(index)
                    }
                }
            },
        ]
    )
}
