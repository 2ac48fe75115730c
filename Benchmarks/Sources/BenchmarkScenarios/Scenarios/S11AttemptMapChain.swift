import Deferred
@preconcurrency import OpenCombine

extension Scenario {
    /// S11: a pending attempt, a thousand inline maps, success, then a read of the tail.
    static let attemptMapChain = Scenario(
        id: "S11",
        title: "attempt map chain, 1,000 stages",
        operation: "stage",
        unit: .nanoseconds,
        fullSize: 1_000_000,
        quickSize: 10_000,
        trials: [
            .deferred: { count in
                Trial {
                    for _ in 0..<count / chainLength {
                        let root = DeferredAttempt<Int, BenchFailure>()
                        var tail = root.attempt
                        for _ in 0..<chainLength {
                            tail = tail.map(upon: .immediate) { $0 &+ 1 }
                        }
                        root.succeed(with: 0)
                        if case .success(let value) = tail.peek() {
                            consume(value)
                        }
                    }
                }
            },
            .nio: nioMapChain,
            .combine: { count in
                Trial {
                    for _ in 0..<count / chainLength {
                        let (root, promise) = makeFailableCombineFuture()
                        var tail = root.eraseToAnyPublisher()
                        for _ in 0..<chainLength {
                            tail = tail.map { $0 &+ 1 }.eraseToAnyPublisher()
                        }
                        let subscription = tail.sink(receiveCompletion: { _ in }, receiveValue: consume)
                        promise(.success(0))
                        withExtendedLifetime(subscription) {}
                    }
                }
            },
        ]
    )
}
