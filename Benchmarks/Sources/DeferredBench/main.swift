import BenchmarkScenarios
import Deferred
import Dispatch
import Foundation
import Synchronization

// deferred-bench: every scenario of shared/BENCHMARKS.md, for Deferred and its peers, in one
// process, printed as one table. See the Performance guide.

let usage = """
    usage: deferred-bench [--quick] [--counts] [--check] [--runs N] [--only S1,S4,...] [--tracking]
                          [--update-docs]
           deferred-bench --check-docs

      --quick     small sizes, for CI: checks that everything runs, not how fast
      --counts    also count instructions, atomic read-modify-writes and retain/release calls
                  per operation under callgrind (Linux, needs valgrind; deterministic)
      --check     fail unless Deferred meets its budgets: allocations, and (counted as with
                  --counts) instructions and atomics
      --runs N    timed runs per implementation (default 7, or 3 with --quick)
      --only IDS  run only these scenarios
      --tracking  with PendingFutures.isTracking on: what a debug build that tracks pays
      --update-docs  after a full run of every scenario, rewrite the generated figures of
                  README.md and the Performance guide from it (implies --counts)
      --check-docs   run nothing; fail if a ratio in README.md or the Performance guide differs by
                  more than 10 % from the table of the run that generated them

    deferred-bench gateway [...] runs the service gateway instead, each implementation in a
    process of its own; deferred-bench gateway --help lists its options.
    deferred-bench limits [...] measures how late time limits run, next to asyncAfter;
    deferred-bench limits --help lists its options.
    deferred-bench --probe ID IMPLEMENTATION N [--tracking] runs one scenario alone for
    callgrind-counts.
    """

var arguments = Array(CommandLine.arguments.dropFirst())
let wantsHelp = arguments.contains("--help") || arguments.contains("-h")
// `gateway --help` and `limits --help` are their own, below; any other `--help` is this one.
if wantsHelp && arguments.first != "gateway" && arguments.first != "limits" {
    print(usage)
    exit(0)
}
if let index = arguments.firstIndex(of: "--gateway-child") {
    exit(gatewayChildMain(arguments[(index + 1)...]) ? 0 : 2)
}
if arguments.first == "gateway" {
    if wantsHelp {
        print(gatewayUsage)
        exit(0)
    }
    let gatewayStarted = ContinuousClock.now
    let gatewayLoad = RunContext.load()
    let results = gatewayMain(Array(arguments.dropFirst()))
    if arguments.contains("--update-docs") {
        guard !arguments.contains("--quick") else {
            print("deferred-bench: gateway --update-docs needs a full run (no --quick)")
            exit(2)
        }
        let context = RunContext.describe(
            loadBefore: gatewayLoad, runs: results.first?.runs ?? 0,
            minutes: (ContinuousClock.now - gatewayStarted).seconds / 60)
        do {
            try updateDocs(gatewayRegions(results, context: context))
            print("Updated the gateway figures of \(documentedFiles.joined(separator: " and ")).")
        } catch {
            print("deferred-bench: cannot update the docs: \(error)")
            exit(1)
        }
    }
    exit(results.allSatisfy { $0.rows.allSatisfy { !$0.measurements.isEmpty } } ? 0 : 1)
}
if arguments.first == "limits" {
    if wantsHelp {
        print(limitsUsage)
        exit(0)
    }
    let limitsStarted = ContinuousClock.now
    let limitsLoad = RunContext.load()
    let (rows, samples) = limitsMain(Array(arguments.dropFirst()))
    if arguments.contains("--update-docs") {
        guard !arguments.contains("--quick") else {
            print("deferred-bench: limits --update-docs needs a full run (no --quick)")
            exit(2)
        }
        let context = RunContext.describe(
            loadBefore: limitsLoad, runs: 1, minutes: (ContinuousClock.now - limitsStarted).seconds / 60)
        do {
            try updateDocs(limitsRegions(rows, samples: samples, context: context))
            print("Updated the table of limits of \(performanceGuide).")
        } catch {
            print("deferred-bench: cannot update the docs: \(error)")
            exit(1)
        }
    }
    exit(0)
}
// Tracking (see --tracking) is on before any scenario, a probe's included.
let tracking = arguments.contains("--tracking")
PendingFutures.isTracking = tracking
if let index = arguments.firstIndex(of: "--probe") {
    let rest = arguments[(index + 1)...].filter { $0 != "--tracking" }
    guard rest.count == 3, let scenario = Scenario.all.first(where: { $0.id == rest[rest.startIndex] }),
        let implementation = Implementation(rawValue: rest[rest.startIndex + 1]),
        let operations = Int(rest[rest.startIndex + 2]), operations > 0
    else {
        print(usage)
        exit(2)
    }
    // On the main thread, and no other started: a process that never started a thread keeps
    // glibc's allocator on its single-threaded path, without atomics, so the counts show the
    // implementation's own atomics; what allocation costs shows in the allocations instead.
    // The counted scenarios do not recurse, so the main thread's stack is enough.
    probe(scenario, implementation, operations: operations)
    exit(0)
}
if arguments.contains("--check-docs") {
    do {
        let problems = try checkDocs()
        for problem in problems {
            print(problem)
        }
        print(problems.isEmpty ? "The docs' ratios match their generated table." : "\(problems.count) problem(s)")
        exit(problems.isEmpty ? 0 : 1)
    } catch {
        print("deferred-bench: \(error)")
        exit(1)
    }
}
let quick = arguments.contains("--quick")
let check = arguments.contains("--check")
let updatingDocs = arguments.contains("--update-docs")
let counting = arguments.contains("--counts") || check || updatingDocs
var runs = quick ? 3 : 7
var only: Set<String>?
if let index = arguments.firstIndex(of: "--runs"), index + 1 < arguments.count, let value = Int(arguments[index + 1]),
    value > 0
{
    runs = value
}
if let index = arguments.firstIndex(of: "--only"), index + 1 < arguments.count {
    only = Set(arguments[index + 1].split(separator: ",").map { $0.uppercased() })
}
if updatingDocs, quick || only != nil || tracking {
    print("deferred-bench: --update-docs needs a full run of every scenario (no --quick, --only or --tracking)")
    exit(2)
}
let loadBefore = RunContext.load()
let started = ContinuousClock.now

/// Writes a progress line to standard error, keeping standard output for the table.
func progress(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}

/// Measures every selected scenario for every implementation that has it.
func measureAll(_ scenarios: [Scenario], quick: Bool, runs: Int) -> [ScenarioResults] {
    var allResults: [ScenarioResults] = []
    for scenario in scenarios {
        let operations = scenario.size(quick: quick)
        let implementations = Implementation.allCases.filter { scenario.trials[$0] != nil }
        var results: [Implementation: Result] = [:]
        if scenario.unit != .bytes {
            let timedRuns = {
                // Two untimed runs each warm caches, the heap and lazily initialized state.
                for _ in 0..<2 {
                    for implementation in implementations {
                        _ = time(scenario.trials[implementation]!(operations))
                    }
                }
                // Alternate the order between runs so that drift hits every implementation alike.
                for run in 0..<runs {
                    for offset in implementations.indices {
                        let implementation = implementations[(run + offset) % implementations.count]
                        let trial = scenario.trials[implementation]!(operations)
                        let timing = time(trial)
                        let scale = scenario.unit.perSecond / Double(operations)
                        results[implementation, default: Result()].perOperation.append(timing.wall.seconds * scale)
                        results[implementation, default: Result()].cpuPerOperation.append(
                            timing.processor.seconds * scale)
                        if let worst = trial.worstRound?() {
                            results[implementation, default: Result()].worstRounds.append(
                                worst * scenario.unit.perSecond)
                        }
                    }
                }
            }
            if scenario.isLoaded {
                withBusyCores(timedRuns)
            } else {
                timedRuns()
            }
        }
        for implementation in implementations {
            let counted = countAllocations(scenario.trials[implementation]!(operations))
            results[implementation, default: Result()].allocationsPerOperation =
                Double(counted.allocations) / Double(operations)
            results[implementation, default: Result()].bytesPerOperation =
                Double(counted.blockBytes) / Double(operations)
        }
        allResults.append(ScenarioResults(scenario: scenario, operations: operations, results: results))
        progress("\(scenario.id) \(scenario.title): done (\(operations) \(scenario.operation)s per run)")
    }
    return allResults
}

/// Adds callgrind's counts to every counted scenario's results.
func addCounts(to all: inout [ScenarioResults]) throws(CountingError) {
    let counter = try Counter()
    defer { counter.remove() }
    for index in all.indices where countedScenarios.contains(all[index].scenario.id) {
        let scenario = all[index].scenario
        for implementation in countedImplementations where scenario.trials[implementation] != nil {
            // Counts are per operation and deterministic, so the quick size is enough.
            let counts = try counter.count(scenario, implementation, operations: scenario.quickSize)
            all[index].results[implementation, default: Result()].counts = counts
        }
        progress("\(scenario.id): counted under callgrind")
    }
}

/// Runs `body` on a thread with a 512 MB stack and waits for it.
///
/// OpenCombine recurses a few frames per operator when it subscribes, so a 1,000-stage chain
/// (S4) needs more than the 8 MB of a main thread. Every implementation runs on one thread
/// with a large stack, so all get the same room.
func onLargeStack(_ body: @escaping @Sendable () -> Void) {
    let finished = DispatchSemaphore(value: 0)
    let worker = Thread {
        body()
        finished.signal()
    }
    worker.stackSize = 512 << 20
    worker.start()
    finished.wait()
}

// `--only S15` selects the whole family: S15-1, S15-10 and S15-1000.
let selected = Scenario.all.filter { scenario in
    only.map { $0.contains(scenario.id) || $0.contains(String(scenario.id.prefix { $0 != "-" })) } ?? true
}
let measured = Mutex<[ScenarioResults]>([])
onLargeStack { [quick, runs] in
    let results = measureAll(selected, quick: quick, runs: runs)
    measured.withLock { $0 = results }
}
var allResults = measured.withLock { $0 }
var counted = false
if counting {
    do {
        try addCounts(to: &allResults)
        counted = true
    } catch {
        #if os(Linux)
            print("deferred-bench: \(error)")
            exit(1)
        #else
            // Callgrind runs on Linux only: elsewhere `--check` checks the allocation budgets.
            guard !arguments.contains("--counts") else {
                print("deferred-bench: \(error)")
                exit(1)
            }
            progress("deferred-bench: \(error); checking the allocation budgets only")
        #endif
    }
}

let processors = ProcessInfo.processInfo.activeProcessorCount
print("Deferred benchmarks: median of \(runs) runs\(quick ? " (quick sizes)" : ""), \(processors) cores")
print()
print(table(allResults))
print()
print("Cells: median time per operation (ratio to Deferred) · heap allocations per operation.")
print("S9: heap bytes per live future with one pending handler, as glibc's allocator lays them out.")
print()
print("Fastest of the \(runs) runs:")
print()
print(fastestRunTable(allResults))
let waiting = allResults.filter { waitingScenarios.contains($0.scenario.id) }
if !waiting.isEmpty {
    print()
    print("Waiting: median processor time per operation (all threads of the process; ratio to wall time)")
    print("and, where rounds are timed, the median over runs of the longest round:")
    print()
    print(waitingTable(waiting))
}
if counted {
    print()
    print("Counted under callgrind (deterministic), per operation: instructions · atomic read-modify-writes")
    print("(ratio to Deferred) · calls to retain and release. Each handler's hand-off to the benchmark's")
    print("sink is one atomic add, for every implementation alike.")
    print()
    print(countsTable(allResults))
}

if check {
    print()
    var failures = 0
    for budget in budgets(allResults, counted: counted) {
        let figure = budget.measure()
        let passed = figure <= budget.limit + 1e-9
        failures += passed ? 0 : 1
        print("\(passed ? "ok  " : "FAIL") \(budget.name): \(format(figure)) (budget \(format(budget.limit)))")
    }
    if failures > 0 {
        print("\(failures) budget(s) exceeded")
        exit(1)
    }
}

if updatingDocs {
    let minutes = (ContinuousClock.now - started).seconds / 60
    let context = RunContext.describe(loadBefore: loadBefore, runs: runs, minutes: minutes)
    do {
        try updateDocs(generatedRegions(allResults, context: context))
        print()
        print("Updated the generated figures of \(documentedFiles.joined(separator: " and ")).")
    } catch {
        print("deferred-bench: cannot update the docs: \(error)")
        exit(1)
    }
}
