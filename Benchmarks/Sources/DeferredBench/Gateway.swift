import BenchmarkScenarios
import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import NIOPosix

// `deferred-bench gateway`: the service gateway of the Performance guide, each implementation in a
// process of its own (so that peak memory, threads and allocations are its own), in rotating
// order, at a saturated and a latency-bound setting, and saturated again with limits that never
// fire, where every implementation does the same work.

let gatewayUsage = """
    usage: deferred-bench gateway [--quick] [--runs N] [--requests N] [--backends N] [--latency-us N]
                                  [--timeout-us N] [--in-flight N,N] [--busy] [--update-docs]

      --requests N     requests per run at the first setting (default 50,000; 2,000 with --quick);
                       a setting with fewer in flight runs a fifth as many
      --backends N     backends per request (default 3)
      --latency-us N   the longest backend latency, in µs; latencies spread evenly from 0 (default 2,000)
      --timeout-us N   each request's time limit, in µs (default 1,500)
      --in-flight N,N  requests in flight: one setting each (default 1,000 (saturated), 1,000 with
                       limits of 50 ms that never fire (saturated, equal work), 10 (latency-bound),
                       then 1,000 again with both cores kept busy)
      --busy           run every setting with both cores kept busy by two other processes
      --runs N         runs per implementation and setting (default 5; 1 with --quick)
      --update-docs    rewrite the gateway figures of README.md and the Performance guide (a full run)
    """

/// The implementations the gateway compares.
enum GatewayImplementation: String, CaseIterable {
    case deferred = "Deferred"
    /// Deferred with each request under a deadline that its backends learn and stop at.
    case deferredDeadlines = "Deferred, deadlines"
    /// Deferred on a `LoopGroup`, the server configuration: each request pinned to one loop.
    case deferredLoops = "Deferred, loops"
    case async = "async/await"
    case nio = "NIO"

    /// Whether this is a variant of Deferred's own row rather than a peer.
    var isVariant: Bool { self == .deferredDeadlines || self == .deferredLoops }

    /// Serves `run` and returns when it is done.
    func serve(_ run: GatewayRun, backends: SimulatedBackends) {
        switch self {
        case .deferred:
            DeferredGateway.serve(run, backends: backends, timers: DispatchQueue.global())
        case .deferredDeadlines:
            DeferredGateway.serve(run, backends: backends, timers: DispatchQueue.global(), deadlines: true)
        case .deferredLoops:
            let loops = LoopGroup(name: "gateway")
            LoopGateway.serve(run, backends: backends, loops: loops)
            _ = loops.shutdown().wait(until: .distantFuture)
        case .async:
            AsyncGateway.serve(run, backends: backends)
        case .nio:
            NIOGateway.serve(run, backends: backends, group: MultiThreadedEventLoopGroup.singleton)
        }
    }
}

/// What one child process measured.
struct GatewayMeasurement {
    var wallSeconds: Double
    var processorSeconds: Double
    var peakMegabytes: Double
    var allocations: Int
    var counts: GatewayCounts

    var line: String {
        "\(wallSeconds) \(processorSeconds) \(peakMegabytes) \(allocations) \(counts.requests) \(counts.timeouts) "
            + "\(counts.workCalls) \(counts.workAfterGivingUp)"
    }

    init(wallSeconds: Double, processorSeconds: Double, peakMegabytes: Double, allocations: Int, counts: GatewayCounts)
    {
        self.wallSeconds = wallSeconds
        self.processorSeconds = processorSeconds
        self.peakMegabytes = peakMegabytes
        self.allocations = allocations
        self.counts = counts
    }

    init?(line: String) {
        let fields = line.split(separator: " ")
        guard fields.count == 8, let wall = Double(fields[0]), let processor = Double(fields[1]),
            let peak = Double(fields[2]), let allocations = Int(fields[3])
        else {
            return nil
        }
        let integers = fields[4...].compactMap { Int($0) }
        guard integers.count == 4 else {
            return nil
        }
        self.init(
            wallSeconds: wall, processorSeconds: processor, peakMegabytes: peak, allocations: allocations,
            counts: GatewayCounts(
                requests: integers[0], timeouts: integers[1], workCalls: integers[2],
                workAfterGivingUp: integers[3]))
    }
}

/// In the child: runs `workload` with `implementation` after a warm-up, and prints the measurement.
func gatewayChild(_ implementation: GatewayImplementation, _ workload: GatewayWorkload, countingAllocations: Bool) {
    let backends = SimulatedBackends()
    var warmUp = workload
    warmUp.requests = max(workload.inFlight, workload.requests / 10)
    implementation.serve(GatewayRun(warmUp), backends: backends)
    let run = GatewayRun(workload)
    let startProcessor = processorTime()
    let start = ContinuousClock.now
    var allocations = 0
    if countingAllocations {
        allocations = gatewayAllocations { implementation.serve(run, backends: backends) }
    } else {
        implementation.serve(run, backends: backends)
    }
    let wall = ContinuousClock.now - start
    let processor = processorTime() - startProcessor
    backends.stop()
    let measurement = GatewayMeasurement(
        wallSeconds: wall.seconds, processorSeconds: processor.seconds, peakMegabytes: peakResidentMegabytes(),
        allocations: allocations, counts: run.counts)
    print(measurement.line)
}

/// The largest resident memory of this process so far.
private func peakResidentMegabytes() -> Double {
    var usage = rusage()
    #if os(Linux)
        // Glibc imports RUSAGE_SELF as an enum case; Darwin as the Int32 that getrusage takes.
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return Double(usage.ru_maxrss) / 1024  // kilobytes on Linux
    #else
        getrusage(RUSAGE_SELF, &usage)
        return Double(usage.ru_maxrss) / 1_048_576  // bytes on Darwin
    #endif
}

/// The summary of one implementation at one setting over its runs.
struct GatewayRow {
    var implementation: GatewayImplementation
    var measurements: [GatewayMeasurement] = []
    var allocationsPerRequest = Double.nan

    private func median(_ figure: (GatewayMeasurement) -> Double) -> Double {
        let sorted = measurements.map(figure).sorted()
        return sorted.isEmpty ? .nan : sorted[sorted.count / 2]
    }

    var requestsPerSecond: Double { median { Double($0.counts.requests) / $0.wallSeconds } }
    var processorMicrosecondsPerRequest: Double {
        median { $0.processorSeconds * 1e6 / Double($0.counts.requests) }
    }
    var peakMegabytes: Double { median(\.peakMegabytes) }
    var timeouts: Double { median { Double($0.counts.timeouts) } }
    /// The share of requests that timed out, from 0 to 1 (the median run's).
    var timeoutRate: Double { median { Double($0.counts.timeouts) / Double(max(1, $0.counts.requests)) } }

    /// Whether the row's timeout rate is more than 5 points from `exact`, the rate with exact
    /// timers: it did other work than the rest, so its figures are not compared.
    func isUnequal(exact: Double) -> Bool {
        !(abs(timeoutRate - exact) <= 0.05)
    }
    var workAfterGivingUp: Double { median { Double($0.counts.workAfterGivingUp) } }
}

/// Runs the gateway comparison and prints its tables; returns the rows of each setting.
func gatewayMain(_ arguments: [String]) -> [GatewayResults] {
    func value(_ name: String) -> String? {
        guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else {
            return nil
        }
        return arguments[index + 1]
    }
    let quick = arguments.contains("--quick")
    let runs = value("--runs").flatMap(Int.init) ?? (quick ? 1 : 5)
    let base = GatewayWorkload(
        requests: value("--requests").flatMap(Int.init) ?? (quick ? 2_000 : 50_000),
        backends: value("--backends").flatMap(Int.init) ?? 3,
        maximumLatency: .microseconds(value("--latency-us").flatMap(Int.init) ?? 2_000),
        timeout: .microseconds(value("--timeout-us").flatMap(Int.init) ?? 1_500),
        inFlight: 0)
    let busy = arguments.contains("--busy")
    let settings: [GatewaySetting] =
        value("--in-flight").map { list in
            list.split(separator: ",").compactMap { Int($0) }.map { GatewaySetting(inFlight: $0, busy: busy) }
        } ?? [
            GatewaySetting(inFlight: 1_000, busy: busy),
            // Saturated, and every implementation does the same work: no reply takes near 50 ms.
            GatewaySetting(inFlight: 1_000, busy: busy, timeout: .milliseconds(50)),
            GatewaySetting(inFlight: 10, busy: busy), GatewaySetting(inFlight: 1_000, busy: true),
        ]
    var results: [GatewayResults] = []
    for setting in settings {
        var workload = base
        workload.inFlight = setting.inFlight
        workload.timeout = setting.timeout ?? base.timeout
        if setting.inFlight < (settings.first?.inFlight ?? setting.inFlight) {
            workload.requests = max(setting.inFlight, workload.requests / 5)
        }
        var rows = GatewayImplementation.allCases.map { GatewayRow(implementation: $0) }
        let timedRuns = {
            for run in 0..<runs {
                for offset in rows.indices {
                    let index = (run + offset) % rows.count
                    if let measurement = gatewayProcess(rows[index].implementation, workload, counting: false) {
                        rows[index].measurements.append(measurement)
                    }
                }
            }
        }
        if setting.busy {
            withBusyCores(timedRuns)
        } else {
            timedRuns()
        }
        for index in rows.indices {
            if let counted = gatewayProcess(rows[index].implementation, workload, counting: true) {
                rows[index].allocationsPerRequest = Double(counted.allocations) / Double(workload.requests)
            }
        }
        progress("gateway, \(setting.inFlight) in flight\(setting.busy ? ", both cores busy" : ""): done")
        let result = GatewayResults(setting: setting, workload: workload, runs: runs, rows: rows)
        print(result.table)
        print()
        results.append(result)
    }
    return results
}

/// One setting of the gateway: how many requests in flight, whether both cores are kept busy, and
/// the time limit if not the run's own.
struct GatewaySetting: Hashable {
    var inFlight: Int
    var busy: Bool
    var timeout: Duration? = nil
}

/// The rows of one setting.
struct GatewayResults {
    var setting: GatewaySetting
    var workload: GatewayWorkload
    var runs: Int
    var rows: [GatewayRow]

    /// The row of `implementation`.
    func row(_ implementation: GatewayImplementation) -> GatewayRow? {
        rows.first { $0.implementation == implementation }
    }

    /// Deferred's processor time per request over `implementation`'s; not a number where either
    /// row's timeout rate is more than 5 points from the exact-timer rate (unequal work).
    func ratio(to implementation: GatewayImplementation) -> Double {
        let exact = workload.exactTimeoutRate
        guard let ours = row(.deferred), let theirs = row(implementation), !ours.isUnequal(exact: exact),
            !theirs.isUnequal(exact: exact)
        else {
            return .nan
        }
        return ours.processorMicrosecondsPerRequest / theirs.processorMicrosecondsPerRequest
    }

    /// The setting's heading and table.
    var table: String {
        gatewayTable(rows, workload: workload, runs: runs, busy: setting.busy)
    }
}

/// Runs one measurement in a child process.
private func gatewayProcess(
    _ implementation: GatewayImplementation, _ workload: GatewayWorkload, counting: Bool
) -> GatewayMeasurement? {
    let executable = Bundle.main.executablePath ?? CommandLine.arguments[0]
    let arguments = [
        "--gateway-child", implementation.rawValue, String(workload.requests), String(workload.backends),
        String(workload.maximumLatency.clampedNanosecondsForBench / 1_000),
        String(workload.timeout.clampedNanosecondsForBench / 1_000), String(workload.inFlight),
        counting ? "count" : "time",
    ]
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    guard (try? process.run()) != nil else {
        progress("gateway: cannot start \(executable)")
        return nil
    }
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let line = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    guard process.terminationStatus == 0, let measurement = GatewayMeasurement(line: line) else {
        progress("gateway: \(implementation.rawValue) failed: \(line)")
        return nil
    }
    return measurement
}

/// In the child: parses `--gateway-child` arguments and runs.
func gatewayChildMain(_ rest: ArraySlice<String>) -> Bool {
    let fields = Array(rest)
    guard fields.count == 7, let implementation = GatewayImplementation(rawValue: fields[0]),
        let requests = Int(fields[1]), let backends = Int(fields[2]), let latency = Int(fields[3]),
        let timeout = Int(fields[4]), let inFlight = Int(fields[5])
    else {
        return false
    }
    let workload = GatewayWorkload(
        requests: requests, backends: backends, maximumLatency: .microseconds(latency),
        timeout: .microseconds(timeout), inFlight: inFlight)
    gatewayChild(implementation, workload, countingAllocations: fields[6] == "count")
    return true
}

/// The table of one setting.
func gatewayTable(_ rows: [GatewayRow], workload: GatewayWorkload, runs: Int, busy: Bool) -> String {
    let deferred = rows.first { $0.implementation == .deferred }
    let late = workload.lateReplies
    let exact = workload.exactTimeoutRate
    var lines = [
        "**\(workload.inFlight) in flight\(busy ? ", both cores kept busy by two other processes" : "")**: "
            + "\(workload.requests) requests, \(workload.backends) backends each "
            + "(0–\(workload.maximumLatency.clampedNanosecondsForBench / 1_000) µs), "
            + "a limit of \(workload.timeout.clampedNanosecondsForBench / 1_000) µs; median of \(runs) runs. "
            + "Backend replies that come after their request's limit: \(late). With exact timers "
            + "\(format(exact * 100)) % of the requests time out; a row marked † is more than 5 points "
            + "from that, so it did other work, and no ratio is drawn from it.",
        "",
        "| implementation | requests/s | processor time per request (ratio to Deferred) | peak memory "
            + "| allocations per request | timeouts (rate) | backend work after giving up |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows {
        let ratio = deferred.map { row.processorMicrosecondsPerRequest / $0.processorMicrosecondsPerRequest }
        let mark = row.isUnequal(exact: exact) ? " †" : ""
        lines.append(
            "| \(row.implementation.rawValue)\(mark) | \(format(row.requestsPerSecond)) | "
                + "\(format(row.processorMicrosecondsPerRequest)) µs (\(format(ratio ?? .nan))×) | "
                + "\(format(row.peakMegabytes)) MB | \(format(row.allocationsPerRequest)) | "
                + "\(format(row.timeouts)) (\(format(row.timeoutRate * 100)) %) | \(format(row.workAfterGivingUp)) |")
    }
    return lines.joined(separator: "\n")
}

/// Counts the allocations `body` makes, on every thread.
private func gatewayAllocations(_ body: () -> Void) -> Int {
    allocations(of: body)
}

extension Duration {
    /// Whole nanoseconds.
    fileprivate var clampedNanosecondsForBench: Int {
        let (seconds, attoseconds) = components
        return Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
    }
}

/// What Deferred's own variants add to the README's comparison, where they did equal work: the
/// server configuration's cost next to NIO's, and the deadlines' next to Deferred's time limits.
private func variantsSentence(_ result: GatewayResults) -> String {
    let exact = result.workload.exactTimeoutRate
    func equal(_ implementation: GatewayImplementation) -> GatewayRow? {
        result.row(implementation).flatMap { $0.isUnequal(exact: exact) ? nil : $0 }
    }
    var sentence = ""
    if let loops = equal(.deferredLoops), let nio = equal(.nio) {
        sentence +=
            " On a `LoopGroup`, the server configuration, it spends "
            + "\(format(loops.processorMicrosecondsPerRequest)) µs "
            + "(\(format(loops.processorMicrosecondsPerRequest / nio.processorMicrosecondsPerRequest))× NIO's)."
    }
    if let ours = equal(.deferred), let deadlines = equal(.deferredDeadlines) {
        sentence +=
            " With each request under a deadline that its backends learn and stop at by themselves, it "
            + "spends \(format(deadlines.processorMicrosecondsPerRequest)) µs "
            + "(\(format(deadlines.processorMicrosecondsPerRequest / ours.processorMicrosecondsPerRequest))× its "
            + "time limits)."
    }
    return sentence
}

/// The generated regions of the gateway: its tables in the Performance guide, and the lead of the
/// README's Performance section.
func gatewayRegions(_ results: [GatewayResults], context: RunContext) -> [String: String] {
    // The README quotes the idle settings whose rows all did equal work (each timeout rate within
    // 5 points of the exact-timer rate); at saturation with limits that fire, requests queue behind
    // the backends, and the rates show how fast each implementation drains the queue, not its
    // timers. Deferred's own variants (deadlines, loops) are not peers: they do not decide it.
    let quoted = results.filter { result in
        let exact = result.workload.exactTimeoutRate
        return !result.setting.busy
            && result.rows.allSatisfy { $0.implementation.isVariant || !$0.isUnequal(exact: exact) }
    }
    let intro = """
        Measured on \(context.date) at commit \(context.commit): \(context.machine), release build; one \
        run of `deferred-bench gateway --update-docs` (\(format(context.minutes)) minutes), each \
        implementation in a process of its own, in rotating order; allocations counted in a separate \
        run of each. Load average \(format(context.loadBefore)) before, \(format(context.loadAfter)) after.
        """
    let sections =
        [wrapped(intro)]
        + results.map { result in
            result.table.split(separator: "\n", omittingEmptySubsequences: false).enumerated().map { index, line in
                index == 0 ? wrapped(String(line)) : String(line)
            }.joined(separator: "\n")
        }
    let comparison =
        quoted.isEmpty
        ? """
        In the run of \(context.date) no setting had every implementation time out as exact timers \
        would (within 5 points), so no ratio is quoted here; the tables show each.
        """
        : quoted.enumerated().map { index, result in
            let ours = result.row(.deferred).map { format($0.processorMicrosecondsPerRequest) } ?? "?"
            let limit = result.workload.timeout.clampedNanosecondsForBench
            let setting =
                index == 0
                ? "With \(result.setting.inFlight) requests in flight on 2 cores (run of \(context.date))"
                : "With \(result.setting.inFlight) in flight"
            let timeouts =
                result.workload.exactTimeoutRate == 0
                ? "and limits of \(format(Double(limit) / 1_000_000)) ms that never fire, every implementation doing the same work"
                : "every implementation timing out \(format(result.workload.exactTimeoutRate * 100)) % of "
                    + "the requests within 5 points, as exact timers would"
            let peers =
                index == 0
                ? "\(format(result.ratio(to: .nio))) times what swift-nio's `EventLoopFuture` spends and "
                    + "\(format(result.ratio(to: .async))) times what async/await spends (task groups with a "
                    + "timeout child)"
                : "\(format(result.ratio(to: .nio))) times NIO's and \(format(result.ratio(to: .async))) "
                    + "times async/await's"
            return "\(setting), \(timeouts), Deferred spends \(ours) µs of processor time per request, "
                + "\(peers).\(variantsSentence(result))"
        }.joined(separator: " ")
    let readme = """
        The job Deferred exists for, measured: a service gateway that fans each request out to \
        three backends, joins their replies, gives up after 1.5 ms and cancels what it no longer \
        needs. \(comparison) Only Deferred and async/await stop the backends of requests they gave \
        up; see [the gateway](\(performanceGuide)#the-gateway).
        """
    return ["gateway figures": sections.joined(separator: "\n\n"), "readme gateway": wrapped(readme)]
}
