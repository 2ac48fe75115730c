import Foundation
public import Testing

/// How big the tests that scale are: every depth, round count and cycle count that differs
/// between a contributor's `swift test` and CI's full proofs comes from here, chosen by one
/// environment variable, `DEFERRED_TEST_SIZE`.
///
/// - `quick` (the default; what the README's `swift test` and CI's sanitizer stages run): chains
///   20,000 deep on a 160 KiB stack, 2,000 rounds of each race, 200 random graphs, 200,000 cycles
///   of each memory test.
/// - `full` (`DEFERRED_TEST_SIZE=full`; CI's full-size stages): chains 1,000,000 deep on an
///   8 MiB stack, 100,000 rounds of each race, 2,000 random graphs, 1,000,000 cycles.
///
/// The quick sizes still catch what each test exists for; the Reliability guide ("Test sizes")
/// gives the reasoning, and ``StackSafetyCalibrationTests`` shows a recursive release and a
/// recursive drain overflowing the quick stack.
///
/// Two switches that are not sizes sit beside it: `DEFERRED_STRESS_STRICT=1` makes a race that
/// never showed an interleaving it names a failure, and `DEFERRED_STRESS_SEED` replays random
/// graphs.
public struct TestSize: Sendable {
    /// The two sets of sizes.
    public enum Profile: String, Sendable {
        /// The default: every test at a size that keeps its proof, in about half a minute.
        case quick
        /// CI's sizes: the figures the README and the Reliability guide promise.
        case full
    }

    /// Which set of sizes these are.
    public let profile: Profile

    /// Levels of each stack-safety chain, fan-out and view chain.
    public let depth: Int

    /// The stack of the thread each stack-safety test runs on (see ``onDeepStack(_:size:_:)``).
    ///
    /// It shrinks with ``depth``: both profiles give about 8 bytes of stack a level, while a level
    /// of recursion costs at least 16 (a return address and a saved frame pointer), so a
    /// recursion once per level overflows it at either size. The library's loops need a constant
    /// 40 to 64 KiB of it in a debug build; the Reliability guide ("Test sizes") has the figures.
    public let deepStackBytes: Int

    /// Rounds of each race, at least (more run while an interleaving is missing).
    public private(set) var raceRounds: Int

    /// Rounds of the races that start a thread in each round (a `ThreadExecutor` each).
    public private(set) var threadRaceRounds: Int

    /// Random graphs checked against the sequential model.
    public private(set) var graphs: Int

    /// Cycles of each resident-memory test (create, use and drop a structure).
    public let memoryCycles: Int

    /// Timed-out blocking waits in the resident-memory test of waits.
    ///
    /// Each sleeps: the system rounds a few microseconds up to tens, so these cost time, not
    /// processor time.
    public let timedOutWaits: Int

    /// Runs of each ported time-travel shape (`TimeTravelShapeTests`): a test that waits on a
    /// virtual clock, run again and again to show that it cannot flake.
    public let timeTravelRuns: Int

    /// The sizes of the attack suites: the quick ones in either profile.
    ///
    /// The attack suites are the stress target's `*AttackTests`: races and chains that fresh eyes
    /// wrote against one change each. Their chains add a shape, not a depth: every kind of stage
    /// goes a million deep in the stack-safety suites at full size, and the quick depth (20,000
    /// levels on a 160 KiB stack) overflows on any recursion once per level. Their races run the
    /// quick rounds, and in CI's strict stage still until every interleaving they name showed up;
    /// the full rounds are for the core race suites.
    public static let attack = TestSize(.quick, sanitized: underSanitizer)

    /// The sizes of the run: `DEFERRED_TEST_SIZE` from the environment, `quick` if unset.
    ///
    /// Any other value stops the run with a message, so a misspelled `full` never passes for
    /// a full run.
    ///
    /// Under a sanitizer the races, graphs and task loops run a quarter of the profile's rounds
    /// (``sanitized(_:)``): a sanitizer slows each round 5 to 15 times, and ThreadSanitizer
    /// reports a race from the order of the accesses it sees, not from a round that went wrong,
    /// so a quarter of the rounds still shows it every access of every path; the full rounds are
    /// the optimized stage's.
    public static let current: TestSize = {
        let name = ProcessInfo.processInfo.environment["DEFERRED_TEST_SIZE"] ?? Profile.quick.rawValue
        guard let profile = Profile(rawValue: name) else {
            fatalError("DEFERRED_TEST_SIZE is '\(name)'; it must be 'quick' (the default) or 'full'")
        }
        return TestSize(profile, sanitized: underSanitizer)
    }()

    /// `count` rounds of a loop that a test sizes itself (tasks started one after another, say),
    /// or a quarter of them under a sanitizer, as for the profile's rounds.
    public static func sanitized(_ count: Int) -> Int {
        underSanitizer ? max(1, count / 4) : count
    }

    /// `count` rounds of a loop that an attack suite sizes itself, `count` being its full size: a
    /// third of it at the quick size (the attacks' loops shape a race, and a third still shows
    /// every interleaving the release stage's full size counts), then a quarter of that under a
    /// sanitizer, as for the profile's rounds.
    public static func attackLoop(_ count: Int) -> Int {
        sanitized(current.profile == .full ? count : max(1, count / 3))
    }

    /// The sizes of `profile`; `sanitized`, with a quarter of its races' rounds and graphs.
    public init(_ profile: Profile, sanitized: Bool = false) {
        self.profile = profile
        switch profile {
        case .quick:
            depth = 20_000
            deepStackBytes = 160 << 10
            raceRounds = 2_000
            threadRaceRounds = 2_000
            graphs = 200
            memoryCycles = 200_000
            timedOutWaits = 40_000
            timeTravelRuns = 100
        case .full:
            depth = 1_000_000
            deepStackBytes = 8 << 20
            raceRounds = 100_000
            threadRaceRounds = 10_000
            graphs = 2_000
            memoryCycles = 1_000_000
            timedOutWaits = 200_000
            timeTravelRuns = 10_000
        }
        if sanitized {
            raceRounds /= 4
            threadRaceRounds /= 4
            graphs /= 4
        }
    }

    /// Whether a race test fails when one of its interleavings never happened
    /// (`DEFERRED_STRESS_STRICT=1`).
    ///
    /// Hard assertions fail everywhere; this is only about *coverage*. On a machine that is busy
    /// with other work, a rare interleaving may not show up however the harness tries, and a new
    /// user's `swift test` must not fail for that. CI's release stress stage runs the full
    /// rounds on an otherwise idle machine and sets it.
    public static var requiresEveryInterleaving: Bool {
        ProcessInfo.processInfo.environment["DEFERRED_STRESS_STRICT"] == "1"
    }

    /// How long after it began a race may still start extra rounds to find a missing
    /// interleaving.
    ///
    /// 60 seconds where every interleaving is required, 2 seconds otherwise (a missing one is
    /// only printed). The minimum rounds run whatever the clock says.
    public static var raceTimeBudget: Duration {
        requiresEveryInterleaving ? .seconds(60) : .seconds(2)
    }

    /// The seed of the random graphs: `DEFERRED_STRESS_SEED`, or a fresh one.
    public static var seed: UInt64 {
        ProcessInfo.processInfo.environment["DEFERRED_STRESS_SEED"].flatMap { UInt64($0) }
            ?? UInt64.random(in: 1...UInt64.max)
    }

    /// Whether this process runs under a sanitizer (its runtime is linked in), whose own
    /// bookkeeping swamps resident-memory and thread-count measurements.
    public static let underSanitizer: Bool = {
        let program = dlopen(nil, RTLD_NOW)
        let runtimes: [String] = ["__tsan_init", "__asan_init"]
        return runtimes.contains { dlsym(program, $0) != nil }
    }()

    /// Whether this process runs under ThreadSanitizer.
    public static let underThreadSanitizer: Bool = dlsym(dlopen(nil, RTLD_NOW), "__tsan_init") != nil
}

extension Trait where Self == ConditionTrait {
    /// Skips single-threaded deep walks under ThreadSanitizer, which has no race to
    /// find in them and would spend a fifth of its CI stage on them: the plain suite and CI's
    /// full-size stage prove their stack, and AddressSanitizer their memory.
    public static var skippedUnderThreadSanitizer: Self {
        .disabled(
            if: TestSize.underThreadSanitizer,
            "a single-threaded deep walk: no race for ThreadSanitizer to find; the plain and full-size runs prove it")
    }
}

/// Prints `line` and flushes standard output at once, so that a log written to a file or a pipe
/// shows a long test's progress as it happens rather than when the buffer fills.
public func progress(_ line: String) {
    print(line)
    fflush(nil)  // every output stream, so no `stdout` global is read
}
