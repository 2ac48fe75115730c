import DeferredExecutors
import NIOCore
import NIOEmbedded

extension Scenario {
    /// S13: schedule bodies at distinct virtual delays (submitted in reverse order of due
    /// time), then advance past them all; each must cost O(log n) (peer: NIO's
    /// `EmbeddedEventLoop`, `scheduleTask(in:)` then `advanceTime(by:)`).
    static let virtualTimeAdvance = Scenario(
        id: "S13",
        title: "virtual time: schedule, then advance",
        operation: "body",
        unit: .nanoseconds,
        fullSize: 100_000,
        quickSize: 10_000,
        trials: [
            .deferred: { count in
                let executor = VirtualTimeExecutor()
                return Trial {
                    for index in 0..<count {
                        executor.submit(after: .nanoseconds(count - index)) { consume(index) }
                    }
                    executor.advance(by: .nanoseconds(count + 1))
                }
            },
            .nio: { count in
                let loop = EmbeddedEventLoop()
                return Trial {
                    for index in 0..<count {
                        _ = loop.scheduleTask(in: .nanoseconds(Int64(count - index))) { consume(index) }
                    }
                    loop.advanceTime(by: .nanoseconds(Int64(count + 1)))
                }
            },
        ]
    )
}
