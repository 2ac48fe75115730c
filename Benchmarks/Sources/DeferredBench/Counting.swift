import BenchmarkScenarios
import Foundation

/// What callgrind counted per operation of one scenario for one implementation.
struct Counts: Sendable {
    /// Instructions executed, in every object (the Swift runtime and libc included).
    var instructions: Double
    /// Atomic read-modify-writes among them (lock-prefixed instructions, and `xchg` with memory).
    var atomics: Double
    /// Calls to the Swift runtime's retain and release.
    var referenceCounting: Double
}

/// The scenarios whose work runs on the measuring thread alone, so that callgrind counts all of it.
///
/// The others hand work to other threads and wait, where counts depend on who waits how long.
/// S17's limit goes to the Dispatch timer service, whose thread sleeps through it (every limit is
/// a minute away and the first is the earliest): only the heap's push runs, on the measuring thread.
let countedScenarios: Set<String> = [
    "S1", "S2", "S3", "S4", "S5", "S10", "S11", "S12", "S13", "S15-1", "S15-10", "S15-1000", "S16-1", "S16-10",
    "S16-1000", "S17",
]

/// The implementations counted: Deferred, the baseline it is judged against, and the naive future.
///
/// OpenCombine runs 10–100 times the instructions, which callgrind takes minutes over.
let countedImplementations: [Implementation] = [.deferred, .nio, .naive]

/// Runs `trial`'s measured work; callgrind collects only while this function runs.
///
/// `deferred-bench --probe` calls it, and `callgrind-counts` is told its name.
@inline(never)
func countedRun(_ trial: Trial) {
    trial.measured()
}

/// The body of `deferred-bench --probe ID IMPLEMENTATION N`: one untimed run of the trial, so
/// that lazily initialized state (type metadata, caches, the heap's free lists) is in place,
/// then one run inside ``countedRun(_:)``.
func probe(_ scenario: Scenario, _ implementation: Implementation, operations: Int) {
    guard let makeTrial = scenario.trials[implementation] else {
        return
    }
    makeTrial(operations).measured()
    countedRun(makeTrial(operations))
}

/// Counts scenarios under callgrind by running this executable's `--probe` mode.
struct Counter {
    /// A copy of this executable without debug information, which callgrind cannot read.
    private let binary: URL
    /// `Benchmarks/Scripts/callgrind-counts`.
    private let script: URL
    private let work: URL
    /// The environment of the counted runs: the copy finds the libraries beside the original.
    private let environment: [String: String]

    /// Prepares the stripped copy, or explains what is missing.
    init() throws(CountingError) {
        #if os(Linux)
            guard let executable = Bundle.main.executableURL else {
                throw CountingError("cannot find this executable")
            }
            script = URL(fileURLWithPath: #filePath)
                .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("Scripts/callgrind-counts")
            for tool in ["valgrind", "strip", "python3"] where !Self.isInstalled(tool) {
                throw CountingError("counting needs \(tool) (see .ci/run for how CI installs it)")
            }
            work = FileManager.default.temporaryDirectory
                .appendingPathComponent("deferred-bench-counts-\(ProcessInfo.processInfo.processIdentifier)")
            binary = work.appendingPathComponent("deferred-bench")
            var environment = ProcessInfo.processInfo.environment
            let libraries = executable.deletingLastPathComponent().path
            environment["LD_LIBRARY_PATH"] = [libraries, environment["LD_LIBRARY_PATH"]]
                .compactMap { $0 }.joined(separator: ":")
            self.environment = environment
            do {
                try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
                try? FileManager.default.removeItem(at: binary)
                try FileManager.default.copyItem(at: executable, to: binary)
            } catch {
                throw CountingError("cannot copy this executable: \(error)")
            }
            guard output(of: "strip", ["--strip-debug", binary.path]) != nil else {
                throw CountingError("strip --strip-debug failed")
            }
        #else
            // Valgrind runs on Linux only; macOS has no equivalent that counts atomics.
            throw CountingError("counting instructions needs valgrind, which runs on Linux only")
        #endif
    }

    /// Counts `operations` operations of `scenario` for `implementation`, per operation.
    func count(_ scenario: Scenario, _ implementation: Implementation, operations: Int) throws(CountingError)
        -> Counts
    {
        let arguments = [
            script.path, "*countedRun*", binary.path, "--probe", scenario.id, implementation.rawValue,
            String(operations),
        ]
        guard let counted = output(of: "python3", arguments, environment: environment) else {
            throw CountingError("callgrind-counts failed for \(scenario.id) \(implementation.rawValue)")
        }
        var totals: [String: Double] = [:]
        for field in counted.split(whereSeparator: \.isWhitespace) {
            let parts = field.split(separator: "=")
            if parts.count == 2, let value = Double(parts[1]) {
                totals[String(parts[0])] = value
            }
        }
        guard let instructions = totals["instructions"], let atomics = totals["atomics"],
            let referenceCounting = totals["refcounting"], instructions > 0
        else {
            throw CountingError("callgrind-counts printed nothing usable: \(counted)")
        }
        let perOperation = Double(operations)
        return Counts(
            instructions: instructions / perOperation, atomics: atomics / perOperation,
            referenceCounting: referenceCounting / perOperation)
    }

    /// Removes the stripped copy.
    func remove() {
        try? FileManager.default.removeItem(at: work)
    }

    private static func isInstalled(_ tool: String) -> Bool {
        output(of: "sh", ["-c", "command -v \(tool)"]) != nil
    }
}

/// Why counting could not run.
struct CountingError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}
