import Deferred
import Dispatch
import Foundation

extension Scenario {
    /// S14: a blocking wait on an unfilled future that gives up 300 ns later.
    ///
    /// It should cost little more than its 300 ns of processor time and leave nothing behind
    /// (peer: the naive future's timed wait on its condition).
    static let timedOutWait = Scenario(
        id: "S14",
        title: "timed-out wait (300 ns)",
        operation: "wait",
        unit: .nanoseconds,
        fullSize: 100_000,
        quickSize: 1_000,
        trials: [
            .deferred: { count in
                let never = Deferred<Int>()
                return Trial {
                    for _ in 0..<count {
                        consume(never.wait(until: .now() + .nanoseconds(300)) ?? 0)
                    }
                }
            },
            .naive: { count in
                let never = NaiveFuture<Int>()
                return Trial {
                    for _ in 0..<count {
                        consume(never.wait(timeout: 300e-9) ?? 0)
                    }
                }
            },
        ]
    )
}
