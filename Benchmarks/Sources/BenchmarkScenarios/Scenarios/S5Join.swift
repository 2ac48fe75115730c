import Deferred
import NIOCore
import NIOEmbedded
@preconcurrency import OpenCombine

extension Scenario {
    /// The futures joined at a time in S5.
    static let joinWidth = 10_000

    /// S5: ten thousand unfilled futures joined into one, filled from one thread, then read.
    static let join = Scenario(
        id: "S5",
        title: "allFilled of 10,000",
        operation: "element",
        unit: .nanoseconds,
        fullSize: 200_000,
        quickSize: 10_000,
        trials: [
            .deferred: { count in
                Trial {
                    for _ in 0..<count / joinWidth {
                        let parts = (0..<joinWidth).map { _ in Deferred::Deferred<Int>() }
                        let joined = parts.allFilled()
                        for (index, part) in parts.enumerated() {
                            part.fill(with: index)
                        }
                        consume(joined.peek()?.count ?? 0)
                    }
                }
            },
            .nio: { count in
                let loop = EmbeddedEventLoop()
                return Trial {
                    for _ in 0..<count / joinWidth {
                        let parts = (0..<joinWidth).map { _ in loop.makePromise(of: Int.self) }
                        let joined = EventLoopFuture.whenAllSucceed(parts.map(\.futureResult), on: loop)
                        for (index, part) in parts.enumerated() {
                            part.succeed(index)
                        }
                        joined.whenSuccess { consume($0.count) }
                    }
                }
            },
            .combine: { count in
                Trial {
                    for _ in 0..<count / joinWidth {
                        let parts = (0..<joinWidth).map { _ in makeCombineFuture() }
                        let subscription = Publishers.Sequence<[OpenCombine.Future<Int, Never>], Never>(
                            sequence: parts.map(\.future)
                        )
                        .flatMap { $0 }
                        .collect()
                        .sink { consume($0.count) }
                        for (index, part) in parts.enumerated() {
                            part.promise(.success(index))
                        }
                        withExtendedLifetime(subscription) {}
                    }
                }
            },
            .naive: { count in
                Trial {
                    for _ in 0..<count / joinWidth {
                        let parts = (0..<joinWidth).map { _ in NaiveFuture<Int>() }
                        let joined = NaiveFuture.all(parts)
                        for (index, part) in parts.enumerated() {
                            part.fill(index)
                        }
                        joined.upon { consume($0.count) }
                    }
                }
            },
        ]
    )
}
