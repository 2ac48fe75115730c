import BenchmarkScenarios

/// A performance target of the project, checked against one run's figures.
struct Target: Sendable {
    /// The scenario it is about.
    let scenario: String
    /// What it asks, as the docs print it.
    let text: String
    /// Each figure the target limits: what it is, the figure from the run, and the limit.
    let limits: @Sendable (ScenarioResults) -> [(name: String, figure: Double, limit: Double)]
}

extension ScenarioResults {
    /// Deferred's median time over `peer`'s, in this run.
    func ratio(to peer: Implementation) -> Double {
        guard let ours = results[.deferred]?.median, let theirs = results[peer]?.median, theirs > 0 else {
            return .nan
        }
        return ours / theirs
    }

    /// Deferred's median longest round over `peer`'s, in this run.
    func worstRoundRatio(to peer: Implementation) -> Double {
        guard let ours = results[.deferred]?.medianWorstRound, let theirs = results[peer]?.medianWorstRound,
            theirs > 0
        else {
            return .nan
        }
        return ours / theirs
    }

    /// Deferred's figures in this run.
    var ours: Result {
        results[.deferred] ?? Result()
    }
}

/// The targets of `shared/BENCHMARKS.md` and of the issues that set them, as the docs print them.
let targets: [Target] = [
    Target(scenario: "S1", text: "S1 ≤ 1 allocation, ≤ 4 atomics and ≤ 0.30× NIO per op") {
        [
            ("allocations", $0.ours.allocationsPerOperation, 1), ("atomics", $0.ours.counts?.atomics ?? .nan, 4),
            ("× NIO", $0.ratio(to: .nio), 0.30),
        ]
    },
    Target(scenario: "S2", text: "S2 ≤ 2 allocations and ≤ 0.7× NIO per op") {
        [("allocations", $0.ours.allocationsPerOperation, 2), ("× NIO", $0.ratio(to: .nio), 0.7)]
    },
    Target(scenario: "S3", text: "S3 per handler ≤ 1.0× NIO and ≤ 1.0× naive") {
        [("× NIO", $0.ratio(to: .nio), 1.0), ("× naive", $0.ratio(to: .naive), 1.0)]
    },
    Target(scenario: "S4", text: "S4 per stage ≤ 9 atomics and ≤ 0.5× NIO") {
        [("atomics", $0.ours.counts?.atomics ?? .nan, 9), ("× NIO", $0.ratio(to: .nio), 0.5)]
    },
    Target(scenario: "S5", text: "S5 per element ≤ 0.5× NIO") {
        [("× NIO", $0.ratio(to: .nio), 0.5)]
    },
    Target(scenario: "S6", text: "S6 idle ≤ 0.6× naive, longest round ≤ 1.5× naive's") {
        [("× naive", $0.ratio(to: .naive), 0.6), ("longest round × naive's", $0.worstRoundRatio(to: .naive), 1.5)]
    },
    Target(scenario: "S8", text: "S8 ≤ 1.0× Continuation") {
        [("× Continuation", $0.ratio(to: .continuation), 1.0)]
    },
    Target(scenario: "S9", text: "S9 ≤ 96 bytes per unfilled future with one handler") {
        [("bytes", $0.ours.bytesPerOperation, 96)]
    },
    Target(scenario: "S10", text: "S10 ≤ 2 allocations and ≤ 0.45× NIO per op") {
        [("allocations", $0.ours.allocationsPerOperation, 2), ("× NIO", $0.ratio(to: .nio), 0.45)]
    },
    Target(scenario: "S11", text: "S11 per stage 1 allocation, ≤ 11 atomics and ≤ 0.7× NIO") {
        [
            ("allocations", $0.ours.allocationsPerOperation, 1.01), ("atomics", $0.ours.counts?.atomics ?? .nan, 11),
            ("× NIO", $0.ratio(to: .nio), 0.7),
        ]
    },
    timeTarget("S15-1", "S15-1 (1 caller a run) ≤ 1.2× the hand-written table (naive)", 1.2),
    timeTarget("S15-10", "S15-10 (10 callers a run) ≤ 1.0× naive", 1.0),
    Target(scenario: "S15-1000", text: "S15-1000 (1,000 callers a run) ≤ 2.1 allocations and ≤ 1.0× naive per caller") {
        [("allocations", $0.ours.allocationsPerOperation, 2.1), ("× naive", $0.ratio(to: .naive), 1.0)]
    },
    timeTarget("S16-1", "S16-1 (1 caller a run) ≤ 1.2× naive", 1.2),
    timeTarget("S16-10", "S16-10 (10 callers a run) ≤ 1.0× naive", 1.0),
    timeTarget("S16-1000", "S16-1000 (1,000 callers a run) ≤ 1.0× naive", 1.0),
    Target(scenario: "S17", text: "S17 per request ≤ 25 allocations and ≤ 0.8× NIO") {
        [("allocations", $0.ours.allocationsPerOperation, 25), ("× NIO", $0.ratio(to: .nio), 0.8)]
    },
    Target(scenario: "S18", text: "S18 per limit ≤ 1.0× NIO") {
        [("× NIO", $0.ratio(to: .nio), 1.0)]
    },
]

/// A target on time alone: Deferred's median at most `limit` times the naive implementation's.
private func timeTarget(_ scenario: String, _ text: String, _ limit: Double) -> Target {
    Target(scenario: scenario, text: text) { [("× naive", $0.ratio(to: .naive), limit)] }
}

/// Renders the targets as a Markdown table: each figure of the run next to its limit.
func targetsTable(_ all: [ScenarioResults]) -> String {
    var lines = ["| target | this run | met |", "|---|---|---|"]
    for target in targets {
        guard let results = all.first(where: { $0.scenario.id == target.scenario }) else {
            continue
        }
        let limits = target.limits(results)
        let figures = limits.map { name, figure, _ in
            name.hasPrefix("×") || name.hasPrefix("longest")
                ? "\(format(figure))\(name.hasPrefix("×") ? name : " (\(name))")"
                : "\(format(figure)) \(format(figure) == "1" && name.hasSuffix("s") ? String(name.dropLast()) : name)"
        }
        let met = limits.allSatisfy { $0.figure <= $0.limit + 1e-9 }
        // A load-dependent ratio: the median run's, and the range over the runs.
        let range =
            loadDependentScenarios.contains(target.scenario)
            ? results.ratioRange(to: .naive).map {
                "; × naive per run: \(format($0.lowerBound)) to \(format($0.upperBound))"
            } ?? "" : ""
        lines.append(
            "| \(target.text) | \(figures.joined(separator: ", "))\(range) | \(met ? "yes" : "**no**") |")
    }
    return lines.joined(separator: "\n")
}
