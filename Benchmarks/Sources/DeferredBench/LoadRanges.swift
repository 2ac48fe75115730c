import BenchmarkScenarios
import Foundation

// Figures that depend on the machine's load (the waiting scenarios against the naive future move
// by up to 90 % between a quiet and a busy machine) are given as ranges over a run's timed runs,
// idle and with both cores busy, so that a reader's own run can be compared with them.

/// The scenarios whose ratios the docs give as ranges: S6 idle and S6L with both cores busy.
let loadDependentScenarios = ["S6", "S6L"]

extension ScenarioResults {
    /// Deferred's time over `peer`'s in each timed run (the implementations take turns within a
    /// run, so each pair shares its moment's load), from the smallest to the largest.
    func ratioRange(to peer: Implementation) -> ClosedRange<Double>? {
        guard let ours = results[.deferred]?.perOperation, let theirs = results[peer]?.perOperation else {
            return nil
        }
        let ratios = zip(ours, theirs).compactMap { $1 > 0 ? $0 / $1 : nil }
        guard let low = ratios.min(), let high = ratios.max() else {
            return nil
        }
        return low...high
    }
}

/// The ranges of the load-dependent scenarios, one row each, with the load they ran under.
func loadRangesTable(_ all: [ScenarioResults], context: RunContext) -> String {
    let peers = Implementation.allCases.filter { $0 != .deferred }
    var lines = [
        "| scenario | load | " + peers.map { "Deferred ÷ \($0.rawValue), per run" }.joined(separator: " | ") + " |",
        "|---|---|" + String(repeating: "---|", count: peers.count),
    ]
    for id in loadDependentScenarios {
        guard let results = all.first(where: { $0.scenario.id == id }) else {
            continue
        }
        let load =
            id == "S6L"
            ? "both cores kept busy by two other processes"
            : "idle (load average \(format(context.loadBefore)) before the run, \(format(context.loadAfter)) after)"
        let cells = peers.map { peer in
            results.ratioRange(to: peer).map { "\(format($0.lowerBound))–\(format($0.upperBound))×" } ?? "—"
        }
        lines.append("| \(id) | \(load) | \(cells.joined(separator: " | ")) |")
    }
    return lines.joined(separator: "\n")
}

/// The ranges the generated table of the load-dependent scenarios states, per scenario and peer.
func measuredRanges(in region: Substring) -> [String: [Implementation: ClosedRange<Double>]] {
    var header: [String] = []
    var ranges: [String: [Implementation: ClosedRange<Double>]] = [:]
    for line in region.split(separator: "\n") where line.hasPrefix("|") {
        let cells = line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
            .map { $0.trimmingCharacters(in: .whitespaces) }
        if cells.first == "scenario", cells.contains(where: { $0.hasSuffix(", per run") }) {
            header = cells
            continue
        }
        guard let id = cells.first, loadDependentScenarios.contains(id), cells.count == header.count else {
            continue
        }
        for (name, cell) in zip(header, cells) {
            guard name.hasPrefix("Deferred ÷ "), name.hasSuffix(", per run"),
                let peer = Implementation(rawValue: String(name.dropFirst(11).dropLast(9))),
                let dash = cell.firstIndex(of: "–"), let low = Double(cell[..<dash]),
                let high = Double(cell[cell.index(after: dash)...].prefix { $0 != "×" }), low <= high
            else {
                continue
            }
            ranges[id, default: [:]][peer] = low...high
        }
    }
    return ranges
}
