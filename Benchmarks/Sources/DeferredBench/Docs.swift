import BenchmarkScenarios
import Foundation

// The figures in README.md and the Performance guide are generated, not typed:
// `deferred-bench --update-docs` rewrites the regions between the markers below from the run it
// just made, and `deferred-bench --check-docs` fails when a ratio anywhere in those two files
// differs by more than 10 % from the table of that run.

/// The repository's root: three folders above this file's (Benchmarks/Sources/DeferredBench).
let repositoryRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// The files whose figures are generated and checked.
let documentedFiles = ["README.md", performanceGuide]

/// The Performance guide, an article of the Deferred catalog.
let performanceGuide = "Sources/Deferred/Deferred.docc/Guides/Performance.md"

/// The marker lines of a generated region named `name`.
func markers(_ name: String) -> (begin: String, end: String) {
    (
        "<!-- deferred-bench --update-docs: \(name) (generated; do not edit) -->",
        "<!-- deferred-bench --update-docs: end of \(name) -->"
    )
}

/// Marks figures from earlier runs, which the check leaves alone; each such region says when
/// and how its figures were measured.
let earlierRunsMarkers = ("<!-- figures from earlier runs -->", "<!-- end of figures from earlier runs -->")

/// Where and how a run was made, for the docs.
struct RunContext {
    let date: String
    let commit: String
    let machine: String
    let loadBefore: Double
    let loadAfter: Double
    let runs: Int
    let minutes: Double

    /// The load average over the last minute.
    static func load() -> Double {
        var loads = [0.0, 0.0, 0.0]
        return getloadavg(&loads, 3) > 0 ? loads[0] : .nan
    }

    /// Describes this machine and the repository's commit.
    static func describe(loadBefore: Double, runs: Int, minutes: Double) -> RunContext {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withFullDate]
        let root = repositoryRoot.path
        let hash = output(of: "git", ["-C", root, "rev-parse", "--short", "HEAD"], quiet: true) ?? "unknown commit"
        let clean =
            (output(of: "git", ["-C", root, "status", "--porcelain", "--untracked-files=no"], quiet: true) ?? "")
            .isEmpty
        let swift =
            output(of: "swift", ["--version"], quiet: true)?.split(separator: "\n").first.map(String.init) ?? "Swift"
        let memory = Double(ProcessInfo.processInfo.physicalMemory) / Double(1 << 30)
        #if arch(x86_64)
            let architecture = "x86_64"
        #elseif arch(arm64)
            let architecture = "arm64"
        #else
            let architecture = "another architecture"
        #endif
        let machine =
            "\(ProcessInfo.processInfo.activeProcessorCount) cores, \(Int(memory.rounded())) GiB, "
            + "\(operatingSystem()) \(architecture), \(swift.replacingOccurrences(of: " (swift-", with: " ("))"
        return RunContext(
            date: formatter.string(from: Date()), commit: hash + (clean ? "" : " with uncommitted changes"),
            machine: machine, loadBefore: loadBefore, loadAfter: load(), runs: runs, minutes: minutes)
    }

    /// The operating system's name, from /etc/os-release where there is one.
    private static func operatingSystem() -> String {
        // Linux distributions name themselves in /etc/os-release; Darwin has no such file.
        if let release = try? String(contentsOfFile: "/etc/os-release", encoding: .utf8),
            let line = release.split(separator: "\n").first(where: { $0.hasPrefix("PRETTY_NAME=") })
        {
            return "Linux (" + line.dropFirst("PRETTY_NAME=".count).trimmingCharacters(in: ["\""]) + ")"
        }
        return ProcessInfo.processInfo.operatingSystemVersionString
    }

    /// The peers' versions, from the benchmarks' Package.resolved.
    private static func peerVersions() -> String {
        let resolved = repositoryRoot.appendingPathComponent("Benchmarks/Package.resolved")
        guard let data = try? Data(contentsOf: resolved),
            let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let pins = root["pins"] as? [[String: Any]]
        else {
            return "peer versions unknown"
        }
        let version = { (identity: String) -> String in
            let pin = pins.first { $0["identity"] as? String == identity }
            return (pin?["state"] as? [String: Any])?["version"] as? String ?? "?"
        }
        return "swift-nio \(version("swift-nio")), OpenCombine \(version("opencombine"))"
    }

    /// One paragraph saying where, when and how the figures were measured.
    var paragraph: String {
        """
        Measured on \(date) at commit \(commit): \(machine), release build, \(Self.peerVersions()); \
        one run of `deferred-bench --update-docs` (\(format(minutes)) minutes), each \
        cell the median of \(runs) timed runs, ± half their spread (fastest to slowest) in percent \
        of the median. Load average \(format(loadBefore)) before the run and \(format(loadAfter)) \
        after. Counts come from callgrind and do not depend on load.
        """
    }
}

/// The generated regions for one run.
func generatedRegions(_ all: [ScenarioResults], context: RunContext) -> [String: String] {
    let waiting = all.filter { waitingScenarios.contains($0.scenario.id) }
    let counted = all.filter { $0.results[.deferred]?.counts != nil }
    let figure = { (id: String, peer: Implementation) -> String in
        all.first { $0.scenario.id == id }.map { format($0.ratio(to: peer)) } ?? "?"
    }
    let performance = [
        context.paragraph,
        "Time per operation (ratio to Deferred; above 1 is slower) · heap allocations per operation; "
            + "S9 is heap bytes per live future with one pending handler:",
        table(all),
        "The scenarios that wait: processor time per operation, every thread of the process counted, "
            + "with its ratio to wall time, and for S6 and S6L the median over runs of each run's "
            + "longest round:",
        waitingTable(waiting),
        "The waiting scenarios' ratios depend on the machine's load: each run's ratio, from the "
            + "smallest to the largest of the \(context.runs) runs, idle and with both cores busy:",
        loadRangesTable(all, context: context),
        "Counted under callgrind, per operation: instructions · atomic read-modify-writes (ratio to "
            + "Deferred's) · calls to retain and release. Each handler's hand-off to the benchmark's "
            + "sink is one atomic add, for every implementation alike:",
        countsTable(counted),
    ]
    let bytes = all.first { $0.scenario.id == "S9" }.map { format($0.ours.bytesPerOperation) } ?? "?"
    let readme = """
        One allocation per unfilled future (\(bytes) bytes with its first handler, S9), none for filled ones, \
        and lock-free filling. In the run of \(context.date) (\(context.machine.split(separator: ",")[0]), \
        median of \(context.runs)), next to swift-nio's `EventLoopFuture`: create + fill + upon (S1) \
        takes \(figure("S1", .nio))× NIO's time, a stage of a 1,000-stage `map` chain (S4) \
        \(figure("S4", .nio))× NIO, joining 10,000 futures (S5) \(figure("S5", .nio))× NIO, and a stage \
        of an attempt's `map` chain (S11) \(figure("S11", .nio))× NIO.
        """
    return [
        "performance figures": performance.map(wrapped).joined(separator: "\n\n"),
        "performance targets": targetsTable(all),
        "readme figures": wrapped(readme),
    ]
}

/// Wraps a paragraph of prose at 96 columns, the docs' width; tables are left as they are.
func wrapped(_ paragraph: String) -> String {
    guard !paragraph.hasPrefix("|") else {
        return paragraph
    }
    var lines: [String] = []
    var line = ""
    for word in paragraph.split(separator: " ") {
        if !line.isEmpty, line.count + 1 + word.count > 96 {
            lines.append(line)
            line = ""
        }
        line += (line.isEmpty ? "" : " ") + word
    }
    lines.append(line)
    return lines.joined(separator: "\n")
}

/// Replaces each generated region of the documented files with its new content.
func updateDocs(_ regions: [String: String]) throws {
    for file in documentedFiles {
        let url = repositoryRoot.appendingPathComponent(file)
        var text = try String(contentsOf: url, encoding: .utf8)
        for (name, content) in regions {
            let (begin, end) = markers(name)
            guard let start = text.range(of: begin),
                let stop = text.range(of: end, range: start.upperBound..<text.endIndex)
            else {
                continue
            }
            text.replaceSubrange(start.upperBound..<stop.lowerBound, with: "\n" + content + "\n")
        }
        try text.write(to: url, atomically: true, encoding: .utf8)
    }
}

/// A ratio the docs state: Deferred's time as a multiple of a peer's, in one scenario.
struct Claim {
    let file: String
    let line: Int
    let scenario: String
    let peer: Implementation
    let ratio: Double
    /// Half a unit of the claim's last written digit.
    let rounding: Double
}

/// The peers a ratio may name, as the docs spell them.
private let peerNames: [(String, Implementation)] = [
    ("NIO", .nio), ("swift-nio", .nio), ("naive", .naive), ("OpenCombine", .combine),
    ("Continuation", .continuation), ("continuation", .continuation),
]

/// Checks every ratio the documented files state against the generated table; returns the
/// problems found.
func checkDocs() throws -> [String] {
    let performance = try String(
        contentsOf: repositoryRoot.appendingPathComponent(performanceGuide), encoding: .utf8)
    let measured = try measuredRatios(in: performance)
    let (begin, end) = markers("performance figures")
    let ranges =
        performance.range(of: begin).flatMap { start in
            performance.range(of: end, range: start.upperBound..<performance.endIndex).map {
                measuredRanges(in: performance[start.upperBound..<$0.lowerBound])
            }
        } ?? [:]
    var problems: [String] = []
    for file in documentedFiles {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent(file), encoding: .utf8)
        let (claims, unattributed) = claims(in: text, file: file)
        problems += unattributed
        for claim in claims {
            guard let figure = measured[claim.scenario]?[claim.peer] else {
                problems.append(
                    "\(file):\(claim.line): \(claim.scenario) has no \(claim.peer.rawValue) figure in the generated table"
                )
                continue
            }
            // A load-dependent scenario's claim may be anywhere in its range over the runs.
            if let range = ranges[claim.scenario]?[claim.peer],
                range.lowerBound - claim.rounding <= claim.ratio, claim.ratio <= range.upperBound + claim.rounding
            {
                continue
            }
            // 10 %, and the rounding of the claim as written (0.04 stands for 0.035 to 0.045).
            if abs(claim.ratio - figure) > 0.10 * figure + claim.rounding {
                problems.append(
                    "\(file):\(claim.line): \(format(claim.ratio))× \(claim.peer.rawValue) for \(claim.scenario), "
                        + "but the generated table says \(format(figure))×")
            }
        }
    }
    return problems
}

/// Deferred's time over each peer's, per scenario, from the generated table's cells, which read
/// `median ±spread (peer over Deferred) · allocations`.
private func measuredRatios(in performance: String) throws -> [String: [Implementation: Double]] {
    let (begin, end) = markers("performance figures")
    guard let start = performance.range(of: begin), let stop = performance.range(of: end) else {
        throw CountingError("the Performance guide has no generated region \"performance figures\"")
    }
    let region = performance[start.upperBound..<stop.lowerBound]
    var header: [String] = []
    var ratios: [String: [Implementation: Double]] = [:]
    for line in region.split(separator: "\n") where line.hasPrefix("|") {
        let cells = line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
            .map { $0.trimmingCharacters(in: .whitespaces) }
        if cells.first == "scenario" {
            header = cells
            continue
        }
        guard let id = cells.first?.split(separator: " ").first.map(String.init), id.hasPrefix("S"),
            cells.count == header.count, ratios[id] == nil
        else {
            continue
        }
        for (name, cell) in zip(header, cells).dropFirst() {
            guard let peer = Implementation(rawValue: name), peer != .deferred,
                let open = cell.firstIndex(of: "("), let times = cell[open...].firstIndex(of: "×"),
                let slower = Double(cell[cell.index(after: open)..<times])
            else {
                continue
            }
            ratios[id, default: [:]][peer] = 1 / slower
        }
    }
    return ratios
}

/// The ratio claims of one file, and the ratios that name a peer but no scenario.
///
/// A claim is a number followed by `×` and a peer's name (`0.37× NIO`, `0.4× the naive`); its
/// scenario is the nearest id (`S1` … `S14`, `S6L`) before it on the same line and in the same
/// table cell, or else the first in the row's first cell. A limit (`≤ 0.5× NIO`) is not a claim. Lines between the earlier-runs markers are
/// left alone.
private func claims(in text: String, file: String) -> ([Claim], [String]) {
    let pattern = /(≤\s*)?(\d+(?:\.\d+)?)×\s+(?:the\s+)?(?:time\s+of\s+)?([A-Za-z-]+)/
    let scenarioPattern = /\bS(\d+)(L|-\d+)?\b/
    var claims: [Claim] = []
    var problems: [String] = []
    var skipping = false
    // The gateway's regions are generated whole from one run of `deferred-bench gateway`, apart
    // from the main table, so their ratios are not checked against it.
    let gatewayMarkers = [markers("gateway figures"), markers("readme gateway")]
    for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
        if line.contains(earlierRunsMarkers.0) || gatewayMarkers.contains(where: { line.contains($0.begin) }) {
            skipping = true
        }
        if line.contains(earlierRunsMarkers.1) || gatewayMarkers.contains(where: { line.contains($0.end) }) {
            skipping = false
        }
        guard !skipping else {
            continue
        }
        for match in line.matches(of: pattern) where match.output.1 == nil {
            guard let peer = peerNames.first(where: { $0.0 == String(match.output.3) })?.1,
                let ratio = Double(match.output.2)
            else {
                continue
            }
            let before = line[line.startIndex..<match.range.lowerBound]
            let cells = before.split(separator: "|", omittingEmptySubsequences: false)
            // The nearest id in the claim's own cell, else (in a table) in the row's first cell.
            let cell = cells.last ?? before
            let rowHeading = line.hasPrefix("|") && cells.count > 1 ? cells[1] : cell
            guard let scenario = cell.matches(of: scenarioPattern).last ?? rowHeading.matches(of: scenarioPattern).first
            else {
                problems.append(
                    "\(file):\(index + 1): \"\(line[match.range])\" names no scenario before it (write its id, e.g. S1)"
                )
                continue
            }
            let decimals = match.output.2.split(separator: ".").dropFirst().first?.count ?? 0
            claims.append(
                Claim(
                    file: file, line: index + 1, scenario: "S\(scenario.output.1)\(scenario.output.2 ?? "")",
                    peer: peer,
                    ratio: ratio, rounding: 0.5 * pow(10, -Double(decimals))))
        }
    }
    return (claims, problems)
}
