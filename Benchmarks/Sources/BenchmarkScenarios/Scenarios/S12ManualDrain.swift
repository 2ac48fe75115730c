import DeferredExecutors
import NIOEmbedded

extension Scenario {
    /// S12: submit bodies to a manual executor, then run them all; each must cost O(1) however
    /// many wait (peer: NIO's `EmbeddedEventLoop`, `execute` then `run`).
    static let manualDrain = Scenario(
        id: "S12",
        title: "manual executor: submit, then drain",
        operation: "body",
        unit: .nanoseconds,
        fullSize: 100_000,
        quickSize: 10_000,
        trials: [
            .deferred: { count in
                let executor = ManualExecutor()
                return Trial {
                    for index in 0..<count {
                        executor.submit { consume(index) }
                    }
                    executor.runUntilIdle()
                }
            },
            .nio: { count in
                let loop = EmbeddedEventLoop()
                return Trial {
                    for index in 0..<count {
                        loop.execute { consume(index) }
                    }
                    loop.run()
                }
            },
        ]
    )
}
