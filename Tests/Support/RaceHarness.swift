import Dispatch
import Foundation
import Synchronization
public import Testing

/// Runs two sides of a race on two dedicated threads, released together, for many rounds, and
/// counts how often each interleaving happened.
///
/// A naive race test on two cores lands in the same interleaving almost every time, and on a
/// busy machine one thread often runs its side before the other is even scheduled. Here each
/// round starts at a spin gate that releases both threads at the same instant while both are
/// running, then each side pauses for a random few steps on a random scale (from none to a few
/// microseconds), so that either side may go first and the two often overlap. Rounds run in
/// batches until every named interleaving has been seen (see ``InterleavingSearch``).
///
/// Hard assertions (exactly once, one winner, order) are checked in every round and always
/// fail the test. An interleaving that is still missing when the budget is spent fails the test
/// only where ``TestSize/requiresEveryInterleaving`` says so (CI's release stress stage); the
/// default run prints it with the counts. the Reliability guide explains why.
public enum RaceHarness {
    /// The side of the race the caller runs on: `"left"`, `"right"`, or `nil` off the harness
    /// threads. (A task-local bound outside any task is local to the thread.)
    @TaskLocal public static var currentSide: String?

    /// Runs `left(fixtures[i])` and `right(fixtures[i])` at the same moment for every `i`.
    ///
    /// Returns once both threads finished every round.
    public static func run<Fixture: Sendable>(
        _ fixtures: [Fixture],
        left: @escaping @Sendable (Fixture) -> Void,
        right: @escaping @Sendable (Fixture) -> Void
    ) {
        let gate = SpinGate()
        let finished = DispatchGroup()
        for (name, side) in [("left", left), ("right", right)] {
            finished.enter()
            // The thread takes its work out of this box and lets go of it before it signals,
            // so that once `run` returns no harness thread still holds a fixture (a thread's
            // closure is released when the thread exits, later): a test that counts live
            // objects right after sees every fixture its caller dropped gone.
            let work = Locked<(fixtures: [Fixture], side: @Sendable (Fixture) -> Void)?>((fixtures, side))
            let thread = Thread {
                do {
                    let (fixtures, side) = work.withLock { taken in
                        defer { taken = nil }
                        return taken.unsafelyUnwrapped
                    }
                    $currentSide.withValue(name) {
                        var random = SplitMix(seed: .random(in: 1...UInt64.max))
                        for (round, fixture) in fixtures.enumerated() {
                            gate.arrive(round: round)
                            pause(stagger(&random))
                            side(fixture)
                        }
                    }
                }
                finished.leave()
            }
            thread.start()
        }
        finished.wait()
    }

    /// Runs a race until every interleaving in `expected` has happened, and reports the counts.
    ///
    /// `classify` names the interleaving of each finished round and checks its hard assertions.
    /// At least `rounds` rounds run; more run, up to the round and time budget, while an
    /// interleaving is missing. A missing interleaving fails the test if `requireEvery` is set.
    public static func expectInterleavings<Fixture: Sendable>(
        _ name: String,
        rounds: Int = TestSize.current.raceRounds,
        expected: Set<String>,
        requireEvery: Bool = TestSize.requiresEveryInterleaving,
        maximumRounds: Int? = nil,
        setup: () -> Fixture,
        left: @escaping @Sendable (Fixture) -> Void,
        right: @escaping @Sendable (Fixture) -> Void,
        classify: (Fixture) -> String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        var search = InterleavingSearch(
            expected: expected, minimumRounds: rounds,
            maximumRounds: maximumRounds ?? Self.maximumRounds(rounds, requireEvery: requireEvery))
        let started = ContinuousClock.now
        while let size = search.nextBatch(timeIsUp: ContinuousClock.now - started > TestSize.raceTimeBudget) {
            let fixtures = (0..<size).map { _ in setup() }
            run(fixtures, left: left, right: right)
            var batch: [String: Int] = [:]
            for fixture in fixtures {
                batch[classify(fixture), default: 0] += 1
            }
            search.record(batch)
        }
        report(search, name: name, requireEvery: requireEvery, sourceLocation: sourceLocation)
    }

    /// Runs a race whose rounds end asynchronously until every interleaving in `expected` has
    /// happened, and reports the counts.
    ///
    /// `batch` runs the given number of rounds and returns how often each interleaving happened.
    public static func expectInterleavings(
        _ name: String,
        rounds: Int = TestSize.current.raceRounds,
        expected: Set<String>,
        requireEvery: Bool = TestSize.requiresEveryInterleaving,
        sourceLocation: SourceLocation = #_sourceLocation,
        batch: (Int) async -> [String: Int]
    ) async {
        var search = InterleavingSearch(
            expected: expected, minimumRounds: rounds,
            maximumRounds: Self.maximumRounds(rounds, requireEvery: requireEvery))
        let started = ContinuousClock.now
        while let size = search.nextBatch(timeIsUp: ContinuousClock.now - started > TestSize.raceTimeBudget) {
            search.record(await batch(size))
        }
        report(search, name: name, requireEvery: requireEvery, sourceLocation: sourceLocation)
    }

    /// Prints the counts, fails on an unexpected interleaving, and on a missing one where every
    /// interleaving is required.
    private static func report(
        _ search: InterleavingSearch, name: String, requireEvery: Bool, sourceLocation: SourceLocation
    ) {
        progress(search.summary(name))
        for outcome in search.unexpected {
            Issue.record("unexpected outcome '\(outcome)' in \(name)", sourceLocation: sourceLocation)
        }
        for interleaving in search.missing {
            if requireEvery {
                Issue.record(
                    "'\(interleaving)' never happened in \(name) in \(search.rounds) rounds",
                    sourceLocation: sourceLocation)
            } else {
                progress(
                    "race \(name): '\(interleaving)' not seen in \(search.rounds) rounds on this machine now; "
                        + "not a failure here (DEFERRED_STRESS_STRICT=1 makes it one, as in CI's release stage)")
            }
        }
    }

    /// The most rounds a race runs while an interleaving is missing (unless the caller says):
    /// 20 times its rounds, and where every interleaving is required at least 20 times the full
    /// size's (a race sized down, as the attack suites are, still searches as long as it would at
    /// full size; the time budget may stop it first).
    private static func maximumRounds(_ rounds: Int, requireEvery: Bool) -> Int {
        requireEvery ? max(rounds, TestSize(.full).raceRounds) * 20 : rounds * 20
    }

    /// Busy-waits for `iterations` steps of a nanosecond or so.
    ///
    /// It shifts one side of a race against the other. Each step is an atomic load, which an
    /// optimized build cannot remove.
    public static func pause(_ iterations: Int) {
        // The global is read once: in a debug build each read of a global goes through its lazy
        // initializer, which under ThreadSanitizer is a pair of system calls (a lock and an
        // unlock), so reading it at every step made pauses cost most of that stage's time.
        let ticks = PauseTicks.shared
        for _ in 0..<iterations {
            _ = ticks.value.load(ordering: .relaxed)
        }
    }

    /// A random pause on a random scale: none, a few steps, or up to a few thousand, so that
    /// rounds cover exact overlap as well as clear leads of either side.
    private static func stagger(_ random: inout SplitMix) -> Int {
        let scales = [0, 16, 128, 1_024, 8_192]
        let scale = scales[Int(random.next() % UInt64(scales.count))]
        return scale == 0 ? 0 : Int(random.next() % UInt64(scale))
    }
}

/// What ``RaceHarness/pause(_:)`` reads at each step.
private final class PauseTicks: Sendable {
    static let shared = PauseTicks()
    let value = Atomic<Int>(0)
}

/// A reusable two-party spin gate: both threads leave round `n` once both have arrived.
///
/// The second thread to arrive opens the gate, and the first, which is spinning, sees it within
/// a cache-line transfer, so both leave while both are running. A thread that has spun for long
/// (its partner is not running: the machine is busy) yields now and then, so a loaded machine
/// still makes progress.
private final class SpinGate: Sendable {
    private let arrivals = Atomic<Int>(0)

    func arrive(round: Int) {
        arrivals.add(1, ordering: .acquiringAndReleasing)
        var spins = 0
        while arrivals.load(ordering: .acquiring) < 2 * (round + 1) {
            spins &+= 1
            if spins & 0xFFFF == 0 {
                sched_yield()
            }
        }
    }
}

/// A small deterministic pseudo-random generator, so that races are reproducible in shape.
public struct SplitMix: RandomNumberGenerator {
    private var state: UInt64

    /// Creates a generator whose sequence is fixed by `seed`.
    public init(seed: UInt64) {
        state = seed
    }

    /// The next pseudo-random number.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var mixed = state
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }
}

/// Keeps the optimizer from deleting a computation.
@inline(never)
public func blackHole<T: ~Copyable>(_ value: consuming T) {}
