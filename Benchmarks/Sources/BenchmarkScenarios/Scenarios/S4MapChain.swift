import Deferred
@preconcurrency import OpenCombine

extension Scenario {
    /// The stages of each chain in S4.
    static let chainLength = 1_000

    /// S4: an unfilled root, a thousand inline maps, the fill, then a read of the tail.
    static let mapChain = Scenario(
        id: "S4",
        title: "map chain, 1,000 stages",
        operation: "stage",
        unit: .nanoseconds,
        fullSize: 1_000_000,
        quickSize: 10_000,
        trials: [
            .deferred: { count in
                Trial {
                    for _ in 0..<count / chainLength {
                        let root = Deferred::Deferred<Int>()
                        var tail = Future(root)
                        for _ in 0..<chainLength {
                            tail = tail.map(upon: .immediate) { $0 &+ 1 }
                        }
                        root.fill(with: 0)
                        consume(tail.peek() ?? 0)
                    }
                }
            },
            .nio: nioMapChain,
            .combine: { count in
                Trial {
                    for _ in 0..<count / chainLength {
                        let (root, promise) = makeCombineFuture()
                        var tail = root.eraseToAnyPublisher()
                        for _ in 0..<chainLength {
                            tail = tail.map { $0 &+ 1 }.eraseToAnyPublisher()
                        }
                        let subscription = tail.sink(receiveValue: consume)
                        promise(.success(0))
                        withExtendedLifetime(subscription) {}
                    }
                }
            },
            .naive: { count in
                Trial {
                    for _ in 0..<count / chainLength {
                        let root = NaiveFuture<Int>()
                        var tail = root
                        for _ in 0..<chainLength {
                            tail = tail.map { $0 &+ 1 }
                        }
                        root.fill(0)
                        tail.upon(consume)
                    }
                }
            },
        ]
    )
}
