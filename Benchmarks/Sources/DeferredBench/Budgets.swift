import BenchmarkScenarios
import Deferred
import Dispatch

/// A budget that `--check` enforces: deterministic counts (allocations, or instructions and
/// atomics from callgrind), not times.
struct Budget {
    /// What is counted.
    let name: String
    /// The most allocations, bytes, instructions or atomics per operation allowed.
    let limit: Double
    /// Measures the figure per operation.
    let measure: () -> Double
}

/// How many operations each budget check performs.
private let checkedOperations = 10_000

/// Allocations per operation of `body`, run `checkedOperations` times.
private func allocationsPerOperation(_ body: (Int) -> Void) -> Double {
    let count = allocations {
        for index in 0..<checkedOperations {
            body(index)
        }
    }
    return Double(count) / Double(checkedOperations)
}

/// The most instructions and atomic read-modify-writes per operation of the hot paths.
///
/// As counted by `deferred-bench --counts`, with about 3 % of headroom on instructions: a change
/// that adds reference counting or a detour to one of them fails CI. The counts include the
/// benchmark's own loop and its sink (one atomic add a handler), and depend on the toolchain and
/// glibc: after upgrading either, re-measure and set them anew. Measured on 2026-11-25 (Swift
/// 6.3.1, glibc 2.36): S1 583 · 4, S2 801 · 6, S3 223 · 3.44, S4 1,140 · 7.01, S10 768 · 7,
/// S11 1,332 · 10.03. S10 re-measured on 2026-11-26 at 818 · 9, once the writer became
/// noncopyable: it now lives to the end of its scope, where its release checks that the attempt
/// finished, so the attempt it hands out takes a reference of its own (one retain and release
/// more) instead of the writer's. S15 3,484 · 49.3 and S16 5,882 · 46.4 measured on 2026-11-26,
/// when runs shared by key came. S10 790 · 8 and S11 1,299 · 10 re-measured on 2026-11-27, when
/// each attempt began to hold its own source and count its own consumers (the hubs went). S16
/// 6,979 · 51.3 and 7,245 · 51.8 (a stop that loses its claim now waits for the publication)
/// re-measured the same day, when consumers after an attempt's first went into
/// links apart that a consumer that leaves gives back (a lock taken to join, an atomic add to
/// leave, a compaction every 16 departures). S17 18,170 · 178.2 measured on 2026-11-29, when a
/// join's links stopped capturing their position and its inputs and a root's cancel handlers
/// were read without retaining them (from 20,720 · 230; NIO's request 62,968 · 276). Re-measured
/// on 2026-11-29 (issue 54), when the cold paths of a shared run and of a cancellation were
/// specialized where they are used and `upon(.immediate)` stopped reaching a lazily made shared
/// executor: S1 527 · 4 (from 597), S2 752 · 6, S3 168.6 · 3.4 (from 222; the naive locked array
/// 172), S10 738 · 8, S12 2,391 · 7, S13 2,645 · 6, S15 at 1, 10 and 1,000 callers a run
/// 6,228 · 75 (from 17,722), 3,932 · 48.2 and 2,901 · 41.1, S16 at 1, 10 and 1,000 callers
/// 12,709 · 143 (from 34,412), 3,485 · 51.6 and 3,875 · 48.7, S17 18,027 · 177.5.
let countedBudgets: [(scenario: String, instructions: Double, atomics: Double)] = [
    ("S1", 545, 4),
    ("S2", 775, 6),
    ("S3", 175, 3.5),
    ("S4", 1_175, 7.05),
    ("S10", 760, 8),
    ("S11", 1_340, 10.05),
    ("S12", 2_470, 7.05),
    ("S13", 2_730, 6.05),
    ("S15-1", 6_420, 75.05),
    ("S15-10", 4_050, 48.5),
    ("S15-1000", 3_000, 41.5),
    ("S16-1", 13_100, 143.05),
    ("S16-10", 3_600, 52),
    ("S16-1000", 4_000, 49),
    ("S17", 18_600, 178.5),
]

/// The budgets, taken from the performance targets; `results` supplies the scenario figures,
/// with callgrind's counts where `counted`.
func budgets(_ results: [ScenarioResults], counted: Bool) -> [Budget] {
    func scenario(_ id: String, _ figure: @escaping (Result) -> Double) -> () -> Double {
        {
            results.first { $0.scenario.id == id }?.results[.deferred].map(figure) ?? .infinity
        }
    }
    let allocationBudgets = [
        Budget(
            name: "S1 create + fill + upon: allocations per op", limit: 1,
            measure: scenario("S1", \.allocationsPerOperation)),
        Budget(
            name: "S2 create + upon + fill: allocations per op", limit: 2,
            measure: scenario("S2", \.allocationsPerOperation)),
        Budget(
            name: "S10 attempt create + succeed + uponSuccess: allocations per op", limit: 2,
            measure: scenario("S10", \.allocationsPerOperation)),
        // One allocation per stage, the node: the success travels down the chain without any.
        // The root's own allocation, shared by a chain's thousand stages, adds 0.001.
        Budget(
            name: "S11 attempt map chain: allocations per stage", limit: 1.01,
            measure: scenario("S11", \.allocationsPerOperation)),
        // That node fits glibc's fast bins (blocks up to 128 bytes), whose allocation and free
        // take about half the instructions of larger blocks; the root adds a fraction of a byte.
        Budget(
            name: "S11 attempt map chain: bytes per stage", limit: 129,
            measure: scenario("S11", \.bytesPerOperation)),
        // A caller's attempt; the run's own share, a thousand callers a run, 0.03.
        Budget(
            name: "S15 shared run, 1,000 callers a run: allocations per caller", limit: 1.05,
            measure: scenario("S15-1000", \.allocationsPerOperation)),
        // Three writers and their cancel handlers, the join with its held inputs, slots and links,
        // the map, the limit with its failure and timer (whose weak reference to the limit takes
        // a side table), the callback, the joined array: 17 measured on 2026-11-29, once a join's
        // links carried their position instead of capturing it (20 on 2026-11-27, once each
        // attempt held its own source; 22 with demand hubs, 24 the day before), and a little for
        // the timer heap's growth.
        Budget(
            name: "S17 gateway request graph: allocations per request", limit: 17.1,
            measure: scenario("S17", \.allocationsPerOperation)),
        // S17 under a deadline: S17's 17, and what the deadline ledger keeps while the request
        // is pending: a record for each of the six attempts it tracks (the deadline's stage, the
        // map, the join, the three producers) and the list of the join's three inputs a change
        // walks up through: 28 measured on 2026-11-29 (31 before the join's links stopped
        // capturing their position).
        Budget(
            name: "S19 gateway request under a deadline: allocations per request", limit: 28.1,
            measure: scenario("S19", \.allocationsPerOperation)),
        // The writer, the limit's node, its pending failure, its timer with its weak reference
        // to the node (a side table), and the callback: 5 measured on 2026-11-27, once the limit
        // held its source itself (7 with a demand hub of its own), and a little for the heap's
        // growth and the service's pass over it every 4,096 limits.
        Budget(
            name: "S18 a limit armed and beaten: allocations per limit", limit: 5.01,
            measure: scenario("S18", \.allocationsPerOperation)),
        Budget(name: "SharedFutures: a caller joining a run in flight: allocations", limit: 0) {
            let shared = SharedFutures<Int, Int>()
            let pending = Deferred<Int>()
            _ = shared.future(for: 0) { _ in pending }
            return allocationsPerOperation { _ in consume(shared.future(for: 0) { _ in pending }.peek() ?? 0) }
        },
        Budget(
            name: "S9 unfilled future + 1 handler: bytes per future", limit: 96,
            measure: scenario("S9", \.bytesPerOperation)),
        Budget(name: "Future(filledWith:) + upon(.immediate): allocations", limit: 0) {
            allocationsPerOperation { Future(filledWith: $0).upon(.immediate, execute: consume) }
        },
        Budget(name: "Deferred(filledWith:) + upon(.immediate): allocations", limit: 0) {
            allocationsPerOperation { Deferred(filledWith: $0).upon(.immediate, execute: consume) }
        },
        Budget(name: "Future(deferred) of a filled deferred, then peek: allocations", limit: 0) {
            allocationsPerOperation { consume(Future(Deferred(filledWith: $0)).peek() ?? 0) }
        },
        Budget(name: "lazy.map view, then peek: allocations", limit: 0) {
            allocationsPerOperation { consume(Future(filledWith: $0).lazy.map(negate).peek() ?? 0) }
        },
        Budget(name: "ignored() view, then peek: allocations", limit: 0) {
            allocationsPerOperation { index in
                if Future(filledWith: index).ignored().peek() != nil {
                    consume(index)
                }
            }
        },
        Budget(name: "map(upon: .immediate) of a filled future: allocations", limit: 0) {
            allocationsPerOperation {
                consume(Future(filledWith: $0).map(upon: .immediate, transform: negate).peek() ?? 0)
            }
        },
        Budget(name: "wait(until:) on a filled future: allocations", limit: 0) {
            let filled = Future(filledWith: 1)
            return allocationsPerOperation { _ in consume(filled.wait(until: .distantFuture) ?? 0) }
        },
    ]
    let countBudgets = countedBudgets.flatMap { id, instructions, atomics in
        [
            Budget(
                name: "\(id): instructions per op (callgrind)", limit: instructions,
                measure: scenario(id) { $0.counts?.instructions ?? .infinity }),
            Budget(
                name: "\(id): atomic read-modify-writes per op (callgrind)", limit: atomics,
                measure: scenario(id) { $0.counts?.atomics ?? .infinity }),
        ]
    }
    return allocationBudgets + (counted ? countBudgets : [])
}

@Sendable
private func negate(_ value: Int) -> Int {
    -value
}
