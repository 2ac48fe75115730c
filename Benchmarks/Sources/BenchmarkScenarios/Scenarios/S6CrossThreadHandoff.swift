import Deferred
import Dispatch
import Foundation
import NIOCore

extension Scenario {
    /// S6: two threads ping-pong through blocking waits.
    ///
    /// Each round uses a fresh future, filled by the other thread and read with a blocking
    /// wait. The futures are made before the clock starts. Each round is timed too, for the
    /// worst one.
    static let crossThreadHandoff = crossThreadHandoff(id: "S6", title: "cross-thread ping-pong", loaded: false)

    /// S6L: S6 while two other processes keep both cores busy.
    static let crossThreadHandoffLoaded = crossThreadHandoff(
        id: "S6L", title: "cross-thread ping-pong, both cores busy", loaded: true)

    private static func crossThreadHandoff(id: String, title: String, loaded: Bool) -> Scenario {
        Scenario(
            id: id,
            title: title,
            operation: "round trip",
            unit: .microseconds,
            fullSize: loaded ? 20_000 : 100_000,
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
                    let rounds = RoundTimer()
                    return Trial(rounds: rounds) {
                        rounds.start()
                        for index in 0..<count {
                            pings[index].fill(with: index)
                            consume(pongs[index].wait(until: .distantFuture) ?? 0)
                            rounds.lap()
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
                    let rounds = RoundTimer()
                    return Trial(rounds: rounds) {
                        rounds.start()
                        for index in 0..<count {
                            pings[index].succeed(index)
                            consume((try? pongs[index].futureResult.wait()) ?? 0)
                            rounds.lap()
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
                    let rounds = RoundTimer()
                    return Trial(rounds: rounds) {
                        rounds.start()
                        for index in 0..<count {
                            pings[index].fill(index)
                            consume(pongs[index].wait())
                            rounds.lap()
                        }
                    }
                },
            ],
            isLoaded: loaded
        )
    }
}

/// Starts the other side of a ping-pong on a thread of its own.
private func startPartner(_ body: @escaping @Sendable () -> Void) {
    Thread(block: body).start()
}
