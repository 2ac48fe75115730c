import Benchmark
import BenchmarkScenarios

// The scenarios of deferred-bench, run by ordo-one/benchmark:
// `swift package --disable-sandbox benchmark` from the Benchmarks directory.
let benchmarks: @Sendable () -> Void = {
    for scenario in Scenario.all {
        for implementation in Implementation.allCases {
            // OpenCombine recurses per operator when it subscribes: its 1,000-stage chain
            // overflows a main thread's stack. deferred-bench measures it on a large stack.
            guard let makeTrial = scenario.trials[implementation],
                scenario.id != "S4" || implementation != .combine
            else {
                continue
            }
            let operations = scenario.size(quick: true)
            Benchmark(
                "\(scenario.id) \(scenario.title) — \(implementation.rawValue)",
                configuration: .init(
                    metrics: [.wallClock, .mallocCountTotal],
                    scalingFactor: .one,
                    maxDuration: .seconds(2),
                    maxIterations: 50
                )
            ) { benchmark in
                let trial = makeTrial(operations)
                benchmark.startMeasurement()
                trial.measured()
                benchmark.stopMeasurement()
            }
        }
    }
}
