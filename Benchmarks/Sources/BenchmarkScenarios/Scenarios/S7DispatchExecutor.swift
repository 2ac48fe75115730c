import Deferred
import Dispatch
import NIOCore
import NIOEmbedded
@preconcurrency import OpenCombine
@preconcurrency import OpenCombineDispatch

extension Scenario {
    /// S7: many futures, each with one handler on one serial Dispatch queue; fill them all and
    /// wait until every handler ran.
    static let dispatchExecutor = Scenario(
        id: "S7",
        title: "handlers on a serial queue",
        operation: "op",
        unit: .nanoseconds,
        fullSize: 100_000,
        quickSize: 1_000,
        trials: [
            .deferred: { count in
                let queue = DispatchQueue(label: "benchmark.S7")
                return Trial {
                    let parts = (0..<count).map { _ in
                        let deferred = Deferred::Deferred<Int>()
                        deferred.upon(queue, execute: consume)
                        return deferred
                    }
                    for (index, part) in parts.enumerated() {
                        part.fill(with: index)
                    }
                    queue.sync {}
                }
            },
            .nio: { count in
                let queue = DispatchQueue(label: "benchmark.S7")
                let loop = EmbeddedEventLoop()
                return Trial {
                    // NIO runs callbacks on the event loop; reaching a queue takes a hop.
                    let parts = (0..<count).map { _ in
                        let promise = loop.makePromise(of: Int.self)
                        promise.futureResult.whenSuccess { value in queue.async { consume(value) } }
                        return promise
                    }
                    for (index, part) in parts.enumerated() {
                        part.succeed(index)
                    }
                    queue.sync {}
                }
            },
            .combine: { count in
                let queue = DispatchQueue(label: "benchmark.S7")
                return Trial {
                    var subscriptions: [AnyCancellable] = []
                    subscriptions.reserveCapacity(count)
                    let promises = (0..<count).map { _ in
                        let (future, promise) = makeCombineFuture()
                        subscriptions.append(future.receive(on: queue.ocombine).sink(receiveValue: consume))
                        return promise
                    }
                    for (index, promise) in promises.enumerated() {
                        promise(.success(index))
                    }
                    queue.sync {}
                }
            },
            .naive: { count in
                let queue = DispatchQueue(label: "benchmark.S7")
                return Trial {
                    let parts = (0..<count).map { _ in
                        let future = NaiveFuture<Int>()
                        future.upon { value in queue.async { consume(value) } }
                        return future
                    }
                    for (index, part) in parts.enumerated() {
                        part.fill(index)
                    }
                    queue.sync {}
                }
            },
        ]
    )
}
