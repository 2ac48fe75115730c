import BenchmarkScenarios

/// The figures of one scenario for one implementation.
struct Result: Sendable {
    /// Time per operation of each timed run, in the scenario's unit.
    var perOperation: [Double] = []
    /// Allocations per operation, from the counting run.
    var allocationsPerOperation: Double = 0
    /// Heap bytes per operation, from the counting run.
    var bytesPerOperation: Double = 0
    /// Processor time per operation of each timed run, every thread of the process counted,
    /// in the scenario's unit.
    var cpuPerOperation: [Double] = []
    /// The longest round of each timed run, in the scenario's unit, where rounds are timed.
    var worstRounds: [Double] = []
    /// Instructions, atomics and reference counting per operation, where callgrind counted them.
    var counts: Counts?

    /// The median processor time per operation.
    var medianCPU: Double {
        Self.median(of: cpuPerOperation)
    }

    /// The median over runs of each run's longest round.
    var medianWorstRound: Double {
        Self.median(of: worstRounds)
    }

    /// The median time per operation.
    var median: Double {
        Self.median(of: perOperation)
    }

    private static func median(of figures: [Double]) -> Double {
        guard !figures.isEmpty else {
            return .nan
        }
        let sorted = figures.sorted()
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    /// The fastest run's time per operation.
    var minimum: Double {
        perOperation.min() ?? .nan
    }
}

/// Every figure of one scenario.
struct ScenarioResults: Sendable {
    let scenario: Scenario
    let operations: Int
    var results: [Implementation: Result]
}

extension Duration {
    /// This duration in seconds.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

extension Unit {
    /// How many of this unit a second holds.
    var perSecond: Double {
        switch self {
        case .nanoseconds: 1e9
        case .microseconds: 1e6
        case .bytes: 1
        }
    }

    /// The unit's symbol.
    var symbol: String {
        switch self {
        case .nanoseconds: "ns"
        case .microseconds: "µs"
        case .bytes: "B"
        }
    }
}
