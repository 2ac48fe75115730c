import Deferred
import Dispatch
import Foundation
import NIOCore

extension Scenario {
    /// S6: two threads ping-pong through blocking waits.
    ///
    /// Each round uses a fresh future, filled by the other thread and read with a blocking
    /// wait. The futures are made before the clock starts.
    static let crossThreadHandoff = Scenario(
        id: "S6",
        title: "cross-thread ping-pong",
        operation: "round trip",
        unit: .microseconds,
        fullSize: 100_000,
        quickSize: 1_000,
        trials: [
            .deferred: { count in
                let pings = (0..<count).map { _ in Deferred<Int>() }
                let pongs = (0..<count).map { _ in Deferred<Int>() }
                startPartner {
                    for index in 0..<count {
                        pongs[index].fill(with: pings[index].wait(until: .distantFuture) ?? 0)
                    }
                }
                return Trial {
                    for index in 0..<count {
                        pings[index].fill(with: index)
                        consume(pongs[index].wait(until: .distantFuture) ?? 0)
                    }
                }
            },
            .nio: { count in
                let pings = (0..<count).map { _ in nioLoop.makePromise(of: Int.self) }
                let pongs = (0..<count).map { _ in nioLoop.makePromise(of: Int.self) }
                startPartner {
                    for index in 0..<count {
                        pongs[index].succeed((try? pings[index].futureResult.wait()) ?? 0)
                    }
                }
                return Trial {
                    for index in 0..<count {
                        pings[index].succeed(index)
                        consume((try? pongs[index].futureResult.wait()) ?? 0)
                    }
                }
            },
            .continuation: { count in
                let pings = (0..<count).map { _ in Rendezvous() }
                let pongs = (0..<count).map { _ in Rendezvous() }
                return Trial {
                    runBlocking {
                        let partner = Task {
                            for index in 0..<count {
                                pongs[index].fill(await pings[index].value)
                            }
                        }
                        for index in 0..<count {
                            pings[index].fill(index)
                            consume(await pongs[index].value)
                        }
                        await partner.value
                    }
                }
            },
            .naive: { count in
                let pings = (0..<count).map { _ in NaiveFuture<Int>() }
                let pongs = (0..<count).map { _ in NaiveFuture<Int>() }
                startPartner {
                    for index in 0..<count {
                        pongs[index].fill(pings[index].wait())
                    }
                }
                return Trial {
                    for index in 0..<count {
                        pings[index].fill(index)
                        consume(pongs[index].wait())
                    }
                }
            },
        ]
    )
}

/// Starts the other side of a ping-pong on a thread of its own.
private func startPartner(_ body: @escaping @Sendable () -> Void) {
    Thread(block: body).start()
}
