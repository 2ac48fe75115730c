import Deferred
@preconcurrency import OpenCombine

extension Scenario {
    /// S10: create a pending attempt, succeed it, then add one inline success handler.
    static let attemptCreateSucceed = Scenario(
        id: "S10",
        title: "attempt create + succeed + uponSuccess",
        operation: "op",
        unit: .nanoseconds,
        fullSize: 1_000_000,
        quickSize: 10_000,
        trials: [
            .deferred: { count in
                Trial {
                    for index in 0..<count {
                        let writer = DeferredAttempt<Int, BenchFailure>()
                        writer.succeed(with: index)
                        writer.attempt.uponSuccess(.immediate, execute: consume)
                    }
                }
            },
            .nio: nioCreateFillUpon,
            .combine: { count in
                Trial {
                    for index in 0..<count {
                        let (future, promise) = makeFailableCombineFuture()
                        promise(.success(index))
                        _ = future.sink(receiveCompletion: { _ in }, receiveValue: consume)
                    }
                }
            },
        ]
    )
}
