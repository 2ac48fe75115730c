import Deferred
import NIOCore
import NIOEmbedded
@preconcurrency import OpenCombine

extension Scenario {
    /// S2: create an unfilled future, add one inline handler, then fill it.
    static let createUponFill = Scenario(
        id: "S2",
        title: "create + upon + fill",
        operation: "op",
        unit: .nanoseconds,
        fullSize: 1_000_000,
        quickSize: 10_000,
        trials: [
            .deferred: { count in
                Trial {
                    for index in 0..<count {
                        let deferred = Deferred::Deferred<Int>()
                        deferred.upon(.immediate, execute: consume)
                        deferred.fill(with: index)
                    }
                }
            },
            .nio: { count in
                let loop = EmbeddedEventLoop()
                return Trial {
                    for index in 0..<count {
                        let promise = loop.makePromise(of: Int.self)
                        promise.futureResult.whenSuccess(consume)
                        promise.succeed(index)
                    }
                }
            },
            .combine: { count in
                Trial {
                    for index in 0..<count {
                        let (future, promise) = makeCombineFuture()
                        let subscription = future.sink(receiveValue: consume)
                        promise(.success(index))
                        withExtendedLifetime(subscription) {}
                    }
                }
            },
            .naive: { count in
                Trial {
                    for index in 0..<count {
                        let future = NaiveFuture<Int>()
                        future.upon(consume)
                        future.fill(index)
                    }
                }
            },
        ]
    )
}
