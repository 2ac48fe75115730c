import Deferred

extension Scenario {
    /// S15: callers join a run in flight for one key, each with an inline success handler, then
    /// the run succeeds; a run per thousand callers (peer: the hand-written dictionary and lock of
    /// ``HandWrittenSharing``, as `naive`).
    static let sharedHit = Scenario(
        id: "S15",
        title: "shared run: a caller joins, gets the result",
        operation: "caller",
        unit: .nanoseconds,
        fullSize: 1_000_000,
        quickSize: 10_000,
        trials: [
            .deferred: { count in
                let shared = SharedAttempts<Int, Int, BenchFailure>()
                return Trial {
                    for _ in 0..<count / callersPerRun {
                        let producer = DeferredAttempt<Int, BenchFailure>()
                        let work = producer.attempt
                        for _ in 0..<callersPerRun {
                            shared.attempt(for: 0) { _ in work }.uponSuccess(.immediate, execute: consume)
                        }
                        producer.succeed(with: 1)
                    }
                }
            },
            .naive: { count in
                let shared = HandWrittenSharing<Int, Int>()
                return Trial {
                    for _ in 0..<count / callersPerRun {
                        let producer = DeferredAttempt<Int, BenchFailure>()
                        let work = producer.attempt
                        for _ in 0..<callersPerRun {
                            shared.attempt(for: 0) { _ in work }.uponSuccess(.immediate, execute: consume)
                        }
                        producer.succeed(with: 1)
                    }
                }
            },
        ]
    )

    /// S16: callers join a run in flight for one key and cancel at once, while its first caller
    /// keeps it running; the run then succeeds (peer: ``HandWrittenSharing``, as `naive`).
    static let sharedCancel = Scenario(
        id: "S16",
        title: "shared run: a caller joins, then cancels",
        operation: "caller",
        unit: .nanoseconds,
        fullSize: 1_000_000,
        quickSize: 10_000,
        trials: [
            .deferred: { count in
                let shared = SharedAttempts<Int, Int, BenchFailure>()
                return Trial {
                    for _ in 0..<count / callersPerRun {
                        let producer = DeferredAttempt<Int, BenchFailure>()
                        let work = producer.attempt
                        let keeper = shared.attempt(for: 0) { _ in work }
                        for _ in 0..<callersPerRun {
                            shared.attempt(for: 0) { _ in work }.cancel()
                        }
                        producer.succeed(with: 1)
                        keeper.uponSuccess(.immediate, execute: consume)
                    }
                }
            },
            .naive: { count in
                let shared = HandWrittenSharing<Int, Int>()
                return Trial {
                    for _ in 0..<count / callersPerRun {
                        let producer = DeferredAttempt<Int, BenchFailure>()
                        let work = producer.attempt
                        let keeper = shared.attempt(for: 0) { _ in work }
                        for _ in 0..<callersPerRun {
                            shared.attempt(for: 0) { _ in work }.cancel()
                        }
                        producer.succeed(with: 1)
                        keeper.uponSuccess(.immediate, execute: consume)
                    }
                }
            },
        ]
    )
}

/// The callers of each run in S15 and S16.
private let callersPerRun = 1_000
