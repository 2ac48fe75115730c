import Deferred
import NIOCore
import NIOEmbedded
@preconcurrency import OpenCombine

extension Scenario {
    /// S9: many live, unfilled futures, each with one pending handler.
    ///
    /// Counted in heap bytes, not timed.
    static let memory = Scenario(
        id: "S9",
        title: "unfilled future + 1 handler",
        operation: "future",
        unit: .bytes,
        fullSize: 1_000_000,
        quickSize: 10_000,
        trials: [
            .deferred: { count in
                var live: [Deferred::Deferred<Int>] = []
                live.reserveCapacity(count)
                return Trial {
                    for _ in 0..<count {
                        let deferred = Deferred::Deferred<Int>()
                        deferred.upon(.immediate, execute: consume)
                        live.append(deferred)
                    }
                }
            },
            .nio: { count in
                let loop = EmbeddedEventLoop()
                var live: [EventLoopPromise<Int>] = []
                live.reserveCapacity(count)
                return Trial {
                    for _ in 0..<count {
                        let promise = loop.makePromise(of: Int.self)
                        promise.futureResult.whenSuccess(consume)
                        live.append(promise)
                    }
                }
            },
            .combine: { count in
                var live: [(OpenCombine.Future<Int, Never>.Promise, AnyCancellable)] = []
                live.reserveCapacity(count)
                return Trial {
                    for _ in 0..<count {
                        let (future, promise) = makeCombineFuture()
                        live.append((promise, future.sink(receiveValue: consume)))
                    }
                }
            },
            .naive: { count in
                var live: [NaiveFuture<Int>] = []
                live.reserveCapacity(count)
                return Trial {
                    for _ in 0..<count {
                        let future = NaiveFuture<Int>()
                        future.upon(consume)
                        live.append(future)
                    }
                }
            },
        ]
    )
}
