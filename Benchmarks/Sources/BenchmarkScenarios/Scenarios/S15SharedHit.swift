import Deferred

extension Scenario {
    /// S15 at 1, 10 and 1,000 callers a run: callers join a run in flight for one key, each
    /// with an inline success handler, then the run succeeds (peer: the hand-written dictionary
    /// and lock of ``HandWrittenSharing``, as `naive`).
    ///
    /// At one caller a run, every caller starts the run and ends it: the cold cache, the
    /// commonest case; with more, every caller after the first joins the run in flight.
    static func sharedHit(callersPerRun: Int) -> Scenario {
        Scenario(
            id: "S15-\(callersPerRun)",
            title: "shared run, \(callers(callersPerRun)): each gets the result",
            operation: "caller",
            unit: .nanoseconds,
            fullSize: callersPerRun == 1 ? 200_000 : 1_000_000,
            quickSize: 10_000,
            trials: [
                .deferred: { hitTrial(SharedAttempts<Int, Int, BenchFailure>(), $0, callersPerRun) },
                .naive: { hitTrial(HandWrittenSharing<Int, Int>(), $0, callersPerRun) },
            ]
        )
    }

    /// S16 at 1, 10 and 1,000 callers a run: callers join a run in flight for one key and
    /// cancel at once, while its first caller keeps it running; the run then succeeds (peer:
    /// ``HandWrittenSharing``, as `naive`).
    ///
    /// The keeper's share (starting the run, its result) is spread over the callers: the whole
    /// of it at one caller a run.
    static func sharedCancel(callersPerRun: Int) -> Scenario {
        Scenario(
            id: "S16-\(callersPerRun)",
            title: "shared run, \(callers(callersPerRun)): each cancels",
            operation: "caller",
            unit: .nanoseconds,
            fullSize: callersPerRun == 1 ? 200_000 : 1_000_000,
            quickSize: 10_000,
            trials: [
                .deferred: { cancelTrial(SharedAttempts<Int, Int, BenchFailure>(), $0, callersPerRun) },
                .naive: { cancelTrial(HandWrittenSharing<Int, Int>(), $0, callersPerRun) },
            ]
        )
    }
}

/// A table of runs shared by key: `SharedAttempts`, or the hand-written one it is measured
/// against.
protocol SharedRunTable: Sendable {
    /// This caller's attempt of the run for `key`, which `start` starts if none is in flight.
    func attempt(for key: Int, start: (Int) -> Attempt<Int, BenchFailure>) -> Attempt<Int, BenchFailure>
}

extension SharedAttempts: SharedRunTable where Key == Int, Success == Int, Failure == BenchFailure {}

extension HandWrittenSharing: SharedRunTable where Key == Int, Value == Int {}

/// S15's trial on `shared`: `count` callers, `callersPerRun` to a run.
private func hitTrial(_ shared: some SharedRunTable, _ count: Int, _ callersPerRun: Int) -> Trial {
    Trial {
        for _ in 0..<count / callersPerRun {
            let producer = DeferredAttempt<Int, BenchFailure>()
            let work = producer.attempt
            for _ in 0..<callersPerRun {
                shared.attempt(for: 0) { _ in work }.uponSuccess(.immediate, execute: consume)
            }
            producer.succeed(with: 1)
        }
    }
}

/// S16's trial on `shared`: `count` callers that cancel, `callersPerRun` to a run kept going by
/// a first caller.
private func cancelTrial(_ shared: some SharedRunTable, _ count: Int, _ callersPerRun: Int) -> Trial {
    Trial {
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
}

/// How a scenario's title counts its callers a run: `1 caller`, `1,000 callers`.
private func callers(_ count: Int) -> String {
    let digits = String(count)
    var grouped = ""
    for (index, digit) in digits.enumerated() {
        if index > 0, (digits.count - index) % 3 == 0 {
            grouped += ","
        }
        grouped.append(digit)
    }
    return "\(grouped) caller\(count == 1 ? "" : "s")"
}
