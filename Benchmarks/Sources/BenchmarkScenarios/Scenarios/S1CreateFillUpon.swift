import Deferred
@preconcurrency import OpenCombine

extension Scenario {
    /// S1: create an unfilled future, fill it, then add one inline handler.
    static let createFillUpon = Scenario(
        id: "S1",
        title: "create + fill + upon",
        operation: "op",
        unit: .nanoseconds,
        fullSize: 1_000_000,
        quickSize: 10_000,
        trials: [
            .deferred: { count in
                Trial {
                    for index in 0..<count {
                        let deferred = Deferred::Deferred<Int>()
                        deferred.fill(with: index)
                        deferred.upon(.immediate, execute: consume)
                    }
                }
            },
            .nio: nioCreateFillUpon,
            .combine: { count in
                Trial {
                    for index in 0..<count {
                        let (future, promise) = makeCombineFuture()
                        promise(.success(index))
                        _ = future.sink(receiveValue: consume)
                    }
                }
            },
            .naive: { count in
                Trial {
                    for index in 0..<count {
                        let future = NaiveFuture<Int>()
                        future.fill(index)
                        future.upon(consume)
                    }
                }
            },
        ]
    )
}
