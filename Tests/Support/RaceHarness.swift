import Dispatch
import Foundation
import Synchronization
public import Testing

/// Runs two sides of a race on two dedicated threads, released at the same instant, for many
/// rounds, and counts how often each interleaving happened.
///
/// A naive race test on two cores lands in the same interleaving almost every time. Here each
/// round waits at a two-party start gate, and then each side spins for its own pseudo-random
/// few iterations, so that either side may go first and the two often overlap.
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
        let gate = StartGate()
        let finished = DispatchGroup()
        for (name, side, isLeft) in [("left", left, true), ("right", right, false)] {
            finished.enter()
            let thread = Thread {
                $currentSide.withValue(name) {
                    var random = SplitMix(seed: isLeft ? 1 : 2)
                    for (round, fixture) in fixtures.enumerated() {
                        gate.arrive(round: round)
                        pause(Int(random.next() % 1_024))
                        side(fixture)
                    }
                }
                finished.leave()
            }
            thread.start()
        }
        finished.wait()
    }

    /// Runs a race and checks that every interleaving in `expected` happened at least once.
    ///
    /// `classify` names the interleaving of each finished round. The counts are printed so the
    /// log shows how the race went.
    public static func expectInterleavings<Fixture: Sendable>(
        _ name: String,
        rounds: Int,
        expected: Set<String>,
        setup: () -> Fixture,
        left: @escaping @Sendable (Fixture) -> Void,
        right: @escaping @Sendable (Fixture) -> Void,
        classify: (Fixture) -> String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let fixtures = (0..<rounds).map { _ in setup() }
        run(fixtures, left: left, right: right)
        var counts: [String: Int] = [:]
        for fixture in fixtures {
            counts[classify(fixture), default: 0] += 1
        }
        let summary = counts.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")
        print("race \(name), \(rounds) rounds: \(summary)")
        for interleaving in expected {
            #expect(
                counts[interleaving, default: 0] > 0, "'\(interleaving)' never happened in \(name)",
                sourceLocation: sourceLocation)
        }
        #expect(
            Set(counts.keys).isSubset(of: expected), "unexpected outcomes in \(name): \(summary)",
            sourceLocation: sourceLocation)
    }

    /// Busy-waits for `iterations` steps of a nanosecond or so.
    ///
    /// It shifts one side of a race against the other. Each step is an atomic load, which an optimized build cannot remove.
    public static func pause(_ iterations: Int) {
        for _ in 0..<iterations {
            _ = pauseTicks.load(ordering: .relaxed)
        }
    }
}

/// What ``RaceHarness/pause(_:)`` reads at each step.
private let pauseTicks = Atomic<Int>(0)

/// A reusable two-party barrier: both threads leave round `n` only once both have arrived.
private final class StartGate: Sendable {
    private let arrivals = Atomic<Int>(0)

    func arrive(round: Int) {
        arrivals.add(1, ordering: .acquiringAndReleasing)
        var spins = 0
        while arrivals.load(ordering: .acquiring) < 2 * (round + 1) {
            spins += 1
            if spins > 20_000 {
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
public func blackHole<T>(_ value: T) {}
