import BenchmarkScenarios

/// Renders results as one Markdown table: a row per scenario, a column per implementation.
///
/// A timed cell reads `median ±spread (ratio to Deferred) · allocations per operation`, the
/// spread being half the distance from the fastest run to the slowest, in percent of the median;
/// a memory
/// cell reads `bytes per future · allocations per future`.
func table(_ all: [ScenarioResults]) -> String {
    render(all) { result, unit, ours, isOurs in cell(result, unit: unit, ours: ours, isOurs: isOurs) }
}

/// Renders the fastest run of every timed scenario as a second table, ratios to Deferred's
/// fastest run.
func fastestRunTable(_ all: [ScenarioResults]) -> String {
    render(all.filter { $0.scenario.unit != .bytes }) { result, unit, ours, isOurs in
        var text = format(result.minimum) + " " + unit.symbol
        if !isOurs, let ours, ours.minimum > 0 {
            text += " (\(format(result.minimum / ours.minimum))×)"
        }
        return text
    }
}

/// The scenarios that wait, whose processor time and longest rounds get a table of their own.
let waitingScenarios: Set<String> = ["S6", "S6L", "S7", "S8", "S14"]

/// Renders processor time per operation (with its ratio to wall time) and the worst round.
func waitingTable(_ all: [ScenarioResults]) -> String {
    render(all) { result, unit, _, _ in
        var text = "cpu " + format(result.medianCPU) + " " + unit.symbol
        if result.median > 0 {
            text += " (\(format(result.medianCPU / result.median))× wall)"
        }
        if !result.worstRounds.isEmpty {
            text += " · worst " + format(result.medianWorstRound) + " " + unit.symbol
        }
        return text
    }
}

/// Renders callgrind's counts per operation, ratios of atomics to Deferred's.
func countsTable(_ all: [ScenarioResults]) -> String {
    render(all.filter { $0.results[.deferred]?.counts != nil }, showingUnit: false) { result, _, ours, isOurs in
        guard let counts = result.counts else {
            return "—"
        }
        var text = "\(format(counts.instructions)) instr · \(format(counts.atomics)) atomics"
        if !isOurs, let ours = ours?.counts, ours.atomics > 0 {
            text += " (\(format(counts.atomics / ours.atomics))×)"
        }
        return text + " · \(format(counts.referenceCounting)) rc"
    }
}

private func render(
    _ all: [ScenarioResults],
    showingUnit: Bool = true,
    cell: (Result, Unit, Result?, Bool) -> String
) -> String {
    let implementations = Implementation.allCases
    var lines = [
        "| scenario | " + implementations.map(\.rawValue).joined(separator: " | ") + " |",
        "|---|" + implementations.map { _ in "---:|" }.joined(),
    ]
    for scenarioResults in all {
        let scenario = scenarioResults.scenario
        let ours = scenarioResults.results[.deferred]
        let heading =
            "\(scenario.id) \(scenario.title) ("
            + (showingUnit ? "\(scenario.unit.symbol)/\(scenario.operation))" : "per \(scenario.operation))")
        let cells = implementations.map { implementation -> String in
            guard let result = scenarioResults.results[implementation] else {
                return "—"
            }
            return cell(result, scenario.unit, ours, implementation == .deferred)
        }
        lines.append("| \(heading) | " + cells.joined(separator: " | ") + " |")
    }
    return lines.joined(separator: "\n")
}

private func cell(_ result: Result, unit: Unit, ours: Result?, isOurs: Bool) -> String {
    let allocations = "\(format(result.allocationsPerOperation)) alloc"
    guard unit != .bytes else {
        return "\(format(result.bytesPerOperation)) B · \(allocations)"
    }
    var text = format(result.median) + " " + unit.symbol
    if result.perOperation.count > 1, result.median > 0 {
        let spread = (result.perOperation.max()! - result.perOperation.min()!) / 2 / result.median * 100
        text += " ±\(Int(spread.rounded()))%"
    }
    if !isOurs, let ours, ours.median > 0 {
        text += " (\(format(result.median / ours.median))×)"
    }
    return text + " · " + allocations
}

/// Formats a figure with about three significant digits.
func format(_ value: Double) -> String {
    guard value.isFinite else {
        return "?"
    }
    let magnitude = abs(value)
    let digits = magnitude >= 100 ? 0 : magnitude >= 10 ? 1 : 2
    var text = String(value.rounded(toPlaces: digits))
    if text.hasSuffix(".0") {
        text.removeLast(2)
    }
    return text
}

extension Double {
    fileprivate func rounded(toPlaces places: Int) -> Double {
        var scale = 1.0
        for _ in 0..<places {
            scale *= 10
        }
        return (self * scale).rounded() / scale
    }
}
