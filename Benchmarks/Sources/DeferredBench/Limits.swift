import BenchmarkScenarios
import Deferred
import Dispatch
import Foundation
import Synchronization

// `deferred-bench limits`: how late time limits run on a Dispatch queue, Deferred's next to
// Dispatch's own `asyncAfter`, interleaved in one process (the Performance guide, "Limits on time").

let limitsUsage = """
    usage: deferred-bench limits [--quick] [--samples N] [--update-docs]

      How late a limit's body starts after its deadline on DispatchQueue.global(): Deferred's
      submit(after:) (what delay and retry's backoff use) and timeout(after:), next to Dispatch's
      asyncAfter, armed in turn in one process, for limits of 1.5 ms, 20 ms and 1 s, idle and with
      both cores kept busy by two other processes.

      --samples N    limits of each kind per size and load (default 1,000; 100 with --quick)
      --update-docs  rewrite the Performance guide's table of limits from this run (a full run)
    """

/// The ways of running a body after a delay that `limits` compares.
enum LimitKind: String, CaseIterable {
    case asyncAfter = "asyncAfter"
    case submitAfter = "submit(after:)"
    case timeout = "timeout(after:)"
}

/// The lateness of every limit of one kind, in nanoseconds, each written once by its body.
private final class LatenessLog: Sendable {
    private let slots: Mutex<[Int]>

    init(count: Int) {
        slots = Mutex(Array(repeating: -1, count: count))
    }

    func record(_ index: Int, deadline: UInt64) {
        let late = Int(truncatingIfNeeded: DispatchTime.now().uptimeNanoseconds &- deadline)
        slots.withLock { $0[index] = late }
    }

    var values: [Int] { slots.withLock { $0 } }
}

/// The lateness of one kind at one size and load.
struct LatenessSample {
    var median: Double
    var p90: Double

    init(_ nanoseconds: [Int]) {
        let sorted = nanoseconds.sorted()
        func at(_ fraction: Double) -> Double {
            sorted.isEmpty ? .nan : Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]) / 1_000
        }
        median = at(0.5)
        p90 = at(0.9)
    }
}

/// One size at one load: each kind's lateness.
struct LimitsRow {
    var delay: Duration
    var busy: Bool
    var samples: [LimitKind: LatenessSample]

    /// The most Deferred's median and p90 may be: 1.3 × asyncAfter's, plus 30 and 50 µs.
    var bound: (median: Double, p90: Double) {
        let dispatch = samples[.asyncAfter]
        return ((dispatch?.median ?? .nan) * 1.3 + 30, (dispatch?.p90 ?? .nan) * 1.3 + 50)
    }

    /// Whether each of Deferred's kinds is within the bound.
    var withinBound: Bool {
        [LimitKind.submitAfter, .timeout].allSatisfy { kind in
            guard let sample = samples[kind] else {
                return false
            }
            return sample.median <= bound.median && sample.p90 <= bound.p90
        }
    }
}

/// Arms `count` limits of each kind of `delay` on `DispatchQueue.global()`, in turn and a few
/// hundred microseconds apart (so that no two deadlines share a wake-up), and returns how late
/// each kind's bodies started.
private func measureLateness(delay: Duration, count: Int) -> [LimitKind: LatenessSample] {
    let kinds = LimitKind.allCases
    let logs = Dictionary(uniqueKeysWithValues: kinds.map { ($0, LatenessLog(count: count)) })
    let group = DispatchGroup()
    let nanoseconds =
        UInt64(delay.components.seconds) * 1_000_000_000
        + UInt64(delay.components.attoseconds / 1_000_000_000)
    // The writers of the timed-out attempts, kept until their limits have passed (a lost writer
    // would fail its attempt at once).
    var writers: [DeferredAttemptBox<Int, BenchFailure>] = []
    writers.reserveCapacity(count)
    var random = SystemRandomNumberGenerator()
    for round in 0..<count {
        // A different kind first in each round, so that none always follows the same one.
        for offset in kinds.indices {
            let kind = kinds[(round + offset) % kinds.count]
            let log = logs[kind]!
            group.enter()
            let deadline = DispatchTime.now().uptimeNanoseconds + nanoseconds
            switch kind {
            case .asyncAfter:
                DispatchQueue.global().asyncAfter(deadline: DispatchTime(uptimeNanoseconds: deadline)) {
                    log.record(round, deadline: deadline)
                    group.leave()
                }
            case .submitAfter:
                DispatchQueue.global().submit(after: delay) {
                    log.record(round, deadline: deadline)
                    group.leave()
                }
            case .timeout:
                let writer = DeferredAttempt<Int, BenchFailure>()
                let attempt = writer.attempt
                writers.append(DeferredAttemptBox(writer))
                attempt.timeout(after: delay, upon: DispatchQueue.global(), failingWith: .timedOut)
                    .upon(.immediate) { _ in
                        log.record(round, deadline: deadline)
                        group.leave()
                    }
            }
            usleep(UInt32.random(in: 250...450, using: &random))
        }
    }
    group.wait()
    withExtendedLifetime(writers) {}
    return logs.mapValues { LatenessSample($0.values) }
}

/// Resident memory per armed limit, in bytes.
///
/// `count` bodies submitted an hour ahead, then `count` hour-long `timeout`s of pending attempts (each with its attempt, its writer's box and
/// 16 bytes of the arrays that keep them), each measured as the growth of the process's peak
/// resident memory. Run last: the limits stay armed.
func armedLimitsMemory(count: Int) -> (submitted: Double, timeouts: Double) {
    let queue = DispatchQueue.global()
    let start = peakResidentBytes()
    for _ in 0..<count {
        queue.submit(after: .seconds(3_600)) {}
    }
    let submitted = peakResidentBytes()
    var writers: [DeferredAttemptBox<Int, BenchFailure>] = []
    writers.reserveCapacity(count)
    var limits: [Attempt<Int, BenchFailure>] = []
    limits.reserveCapacity(count)
    let before = peakResidentBytes()
    for _ in 0..<count {
        let writer = DeferredAttempt<Int, BenchFailure>()
        limits.append(writer.attempt.timeout(after: .seconds(3_600), upon: queue, failingWith: .timedOut))
        writers.append(DeferredAttemptBox(writer))
    }
    let after = peakResidentBytes()
    withExtendedLifetime((writers, limits)) {}
    return (Double(submitted - start) / Double(count), Double(after - before) / Double(count))
}

/// The largest resident memory of this process so far, in bytes.
private func peakResidentBytes() -> Int {
    var usage = rusage()
    #if os(Linux)
        // Glibc imports RUSAGE_SELF as an enum case; Darwin as the Int32 that getrusage takes.
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return usage.ru_maxrss * 1_024  // kilobytes on Linux
    #else
        getrusage(RUSAGE_SELF, &usage)
        return usage.ru_maxrss  // bytes on Darwin
    #endif
}

/// Runs the comparison and prints its table; returns the rows and the limits of each kind per row.
func limitsMain(_ arguments: [String]) -> (rows: [LimitsRow], samples: Int) {
    let quick = arguments.contains("--quick")
    var samples = quick ? 100 : 1_000
    if let index = arguments.firstIndex(of: "--samples"), index + 1 < arguments.count,
        let value = Int(arguments[index + 1]), value > 0
    {
        samples = value
    }
    let delays: [Duration] = [.microseconds(1_500), .milliseconds(20), .seconds(1)]
    var rows: [LimitsRow] = []
    for busy in [false, true] {
        let measure = {
            // A warm-up, so that the first limits do not pay for Dispatch's threads and the heap.
            _ = measureLateness(delay: .microseconds(500), count: 20)
            for delay in delays {
                rows.append(LimitsRow(delay: delay, busy: busy, samples: measureLateness(delay: delay, count: samples)))
                progress("limits of \(delay)\(busy ? ", both cores busy" : ""): done")
            }
        }
        if busy {
            withBusyCores(measure)
        } else {
            measure()
        }
    }
    print(limitsTable(rows, samples: samples))
    let memory = armedLimitsMemory(count: quick ? 100_000 : 1_000_000)
    print(
        "\nResident memory per armed limit (\(quick ? "100,000" : "a million") armed at once): "
            + "submit(after:) \(format(memory.submitted)) bytes, timeout(after:) with its pending attempt "
            + "\(format(memory.timeouts)) bytes.")
    return (rows, samples)
}

/// The table of a run: per size and load, each kind's median and p90 lateness in µs.
func limitsTable(_ rows: [LimitsRow], samples: Int) -> String {
    var lines = [
        "| limit | load | asyncAfter | submit(after:) | timeout(after:) | bound: 1.3 × asyncAfter + 30 µs · + 50 µs | within |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows {
        func cell(_ kind: LimitKind) -> String {
            guard let sample = row.samples[kind] else {
                return "?"
            }
            return "\(format(sample.median)) · \(format(sample.p90)) µs"
        }
        let delay =
            row.delay >= .seconds(1) ? "\(row.delay.components.seconds) s" : "\(format(row.delay.milliseconds)) ms"
        lines.append(
            "| \(delay) | \(row.busy ? "both cores busy" : "idle") | \(cell(.asyncAfter)) | \(cell(.submitAfter)) | "
                + "\(cell(.timeout)) | \(format(row.bound.median)) · \(format(row.bound.p90)) µs | "
                + "\(row.withinBound ? "yes" : "**no**") |")
    }
    return lines.joined(separator: "\n")
}

/// The generated region of the Performance guide: the context of the run and its table.
func limitsRegions(_ rows: [LimitsRow], samples: Int, context: RunContext) -> [String: String] {
    let intro = """
        Measured on \(context.date) at commit \(context.commit): \(context.machine), release build; one \
        run of `deferred-bench limits --update-docs` (\(format(context.minutes)) minutes), \(samples) \
        limits of each kind per row, armed in turn on `DispatchQueue.global()` a few hundred \
        microseconds apart; the median · p90 of each kind's lateness, from its deadline to the start \
        of its body. Load average \(format(context.loadBefore)) before, \(format(context.loadAfter)) after.
        """
    return ["limits on time": wrapped(intro) + "\n\n" + limitsTable(rows, samples: samples)]
}

extension Duration {
    /// The duration in milliseconds.
    fileprivate var milliseconds: Double {
        Double(components.seconds) * 1_000 + Double(components.attoseconds) / 1e15
    }
}
