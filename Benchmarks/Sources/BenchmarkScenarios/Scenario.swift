import Dispatch

/// The implementations compared in every scenario.
public enum Implementation: String, CaseIterable, Sendable {
    /// This library.
    case deferred = "Deferred"
    /// swift-nio's `EventLoopPromise` and `EventLoopFuture`.
    case nio = "NIO"
    /// OpenCombine's `Future` with `sink`.
    case combine = "OpenCombine"
    /// Bare Swift Concurrency continuations.
    case continuation = "Continuation"
    /// The textbook future: a lock, an optional value and an array of callbacks.
    case naive = "Naive"
}

/// What a scenario's figure counts per operation.
public enum Unit: Sendable {
    /// Nanoseconds per operation.
    case nanoseconds
    /// Microseconds per operation.
    case microseconds
    /// Heap bytes per operation (memory scenarios, not timed).
    case bytes
}

/// A prepared run of one scenario for one implementation.
///
/// Setup is done, and `measured` performs exactly the work to time and count. Whatever it
/// keeps alive is released when the trial is dropped, outside the measurement.
public struct Trial {
    /// The work to measure.
    public let measured: () -> Void

    /// The longest round of the last run, in seconds, for scenarios that time their rounds.
    public let worstRound: (() -> Double)?

    /// Creates a trial that measures `measured`.
    public init(_ measured: @escaping () -> Void) {
        self.measured = measured
        worstRound = nil
    }

    /// Creates a trial that measures `measured` and times each of its rounds with `rounds`.
    public init(rounds: RoundTimer, _ measured: @escaping () -> Void) {
        self.measured = measured
        worstRound = { rounds.worst }
    }
}

/// Times the rounds of a trial on the measuring thread and keeps the longest.
///
/// Reading the clock costs some 20 ns a round, for every implementation alike.
public final class RoundTimer {
    private var last: UInt64 = 0
    private var longest: UInt64 = 0

    /// A timer with no rounds yet.
    public init() {}

    /// Starts the first round.
    public func start() {
        longest = 0
        last = DispatchTime.now().uptimeNanoseconds
    }

    /// Ends a round and starts the next.
    public func lap() {
        let now = DispatchTime.now().uptimeNanoseconds
        longest = max(longest, now - last)
        last = now
    }

    /// The longest round so far, in seconds.
    public var worst: Double {
        Double(longest) / 1e9
    }
}

/// One of the benchmark scenarios: S1–S9 of `shared/BENCHMARKS.md`, S10–S11 for attempts,
/// S12–S13 for the test executors, S6L (S6 on a busy machine), S14 (a wait that times out), and
/// S15–S16 for runs shared by key (each at 1, 10 and 1,000 callers a run: `S15-1` to
/// `S16-1000`), S17–S18 for the gateway's request and its time limit, S19 for
/// that request under a deadline.
public struct Scenario: Sendable {
    /// The scenario's id, `S1` to `S19`, `S6L`, or `S15-1` to `S16-1000`.
    public let id: String
    /// What it does, in a few words.
    public let title: String
    /// What one operation is: `op`, `handler`, `stage`, ...
    public let operation: String
    /// What the figure counts.
    public let unit: Unit
    /// How many operations a full run performs.
    public let fullSize: Int
    /// How many operations a quick run performs.
    public let quickSize: Int
    /// The trial makers, for the implementations that have this scenario.
    public let trials: [Implementation: @Sendable (Int) -> Trial]
    /// Whether it runs with both cores kept busy by two other processes.
    public var isLoaded = false

    /// The operations per trial for a full or quick run.
    public func size(quick: Bool) -> Int {
        quick ? quickSize : fullSize
    }
}

extension Scenario {
    /// Every scenario, in order.
    public static let all: [Scenario] = [
        .createFillUpon, .createUponFill, .fanOut, .mapChain, .join,
        .crossThreadHandoff, .dispatchExecutor, .asyncBridge, .memory, .attemptCreateSucceed,
        .attemptMapChain, .manualDrain, .virtualTimeAdvance, .crossThreadHandoffLoaded, .timedOutWait,
        .sharedHit(callersPerRun: 1), .sharedHit(callersPerRun: 10), .sharedHit(callersPerRun: 1_000),
        .sharedCancel(callersPerRun: 1), .sharedCancel(callersPerRun: 10), .sharedCancel(callersPerRun: 1_000),
        .gatewayGraph, .timeoutWithdrawn, .gatewayGraphUnderDeadline,
    ]
}
