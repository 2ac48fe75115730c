import DeferredExecutors
import Dispatch
import Foundation

// `deferred-demo`: realistic uses of Deferred, each printed with timings.
// Run `swift run deferred-demo` for all scenarios, or name one: `swift run deferred-demo service`.

let scenarios: [Scenario] = [
    Scenario(
        name: "service",
        summary: "a service vends read-only futures that its private Deferreds fill",
        run: runServiceScenario
    ),
    Scenario(
        name: "pipeline",
        summary: "map, andThen and lazy.map turn one future into others, on chosen executors",
        run: runPipelineScenario
    ),
    Scenario(
        name: "search",
        summary: "search-as-you-type: each keystroke cancels the previous query",
        run: runSearchScenario
    ),
    Scenario(
        name: "images",
        summary: "table cells share one download per avatar; it stops when every cell that wanted it scrolls away",
        run: runSharedImagesScenario
    ),
    Scenario(
        name: "sum",
        summary: "prices from several shops summed once all arrive: allFilled, and a fold with and",
        run: runSumScenario
    ),
    Scenario(
        name: "timeout",
        summary: "a slow reply replaced by a fallback after a time limit; a fast one gets through",
        run: runTimeoutScenario
    ),
    Scenario(
        name: "waiting",
        summary: "blocking waits that poll before they sleep, time out cleanly; a cancelled get()",
        run: runWaitingScenario
    ),
    Scenario(
        name: "ui-thread",
        summary: "a dedicated run-loop thread owns the UI; a reused cell drops a stale reply",
        run: runUIThreadScenario
    ),
    Scenario(
        name: "debugging",
        summary: "a service forgets to answer on one path: the lost writer, and the futures left pending",
        run: runDebuggingScenario
    ),
    Scenario(
        name: "main-thread",
        summary: "results reach the main thread through the main queue and the main run loop",
        run: runMainThreadScenario
    ),
]

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.contains("--help") || arguments.contains("-h") {
    print("usage: deferred-demo [scenario ...]\n\nScenarios (all run when none is named):")
    for scenario in scenarios {
        print("  \(scenario.name.padding(toLength: 12, withPad: " ", startingAt: 0)) \(scenario.summary)")
    }
} else {
    let unknown = arguments.filter { name in !scenarios.contains { $0.name == name } }
    guard unknown.isEmpty else {
        print("deferred-demo: unknown scenario \(unknown.joined(separator: ", ")); try --help")
        exit(2)
    }
    for scenario in scenarios where arguments.isEmpty || arguments.contains(scenario.name) {
        print("== \(scenario.name): \(scenario.summary)")
        scenario.run()
        print()
    }
}
