import Foundation

/// The sizes of the stress tests, from the environment, so that CI can run them small under a
/// sanitizer and at full size in a release build.
///
/// - `DEFERRED_STRESS_ROUNDS`: rounds of each race (default 10,000; CI runs 100,000).
/// - `DEFERRED_STRESS_DEPTH`: depth of the stack-safety chains (default 1,000,000).
/// - `DEFERRED_STRESS_GRAPHS`: random graphs to check against the model (default 200).
/// - `DEFERRED_STRESS_SEED`: the seed of the random graphs (default: a fresh one, printed).
/// - `DEFERRED_STRESS_STRICT`: `1` makes an interleaving that a race never produced a failure
///   (CI's release stress stage sets it; by default it is printed, not failed).
public enum Stress {
    /// Rounds of each race.
    public static var rounds: Int {
        integer("DEFERRED_STRESS_ROUNDS") ?? 10_000
    }

    /// Depth of the stack-safety chains.
    public static var depth: Int {
        integer("DEFERRED_STRESS_DEPTH") ?? 1_000_000
    }

    /// Whether a race test fails when one of its interleavings never happened.
    ///
    /// Hard assertions fail everywhere; this is only about *coverage*. On a machine that is busy
    /// with other work, a rare interleaving may not show up in a default run however the harness
    /// tries, and a new user's `swift test` must not fail for that. CI's release stress stage runs
    /// 100,000 rounds on an otherwise idle machine and sets `DEFERRED_STRESS_STRICT=1`.
    public static var requiresEveryInterleaving: Bool {
        integer("DEFERRED_STRESS_STRICT") == 1
    }

    /// How long a race keeps running extra rounds to find a missing interleaving.
    public static var raceTimeBudget: Duration {
        requiresEveryInterleaving ? .seconds(60) : .seconds(10)
    }

    /// How many random graphs to check.
    public static var graphs: Int {
        integer("DEFERRED_STRESS_GRAPHS") ?? 200
    }

    /// The seed for random graphs: the one asked for, or a fresh one.
    public static var seed: UInt64 {
        ProcessInfo.processInfo.environment["DEFERRED_STRESS_SEED"].flatMap { UInt64($0) }
            ?? UInt64.random(in: 1...UInt64.max)
    }

    private static func integer(_ name: String) -> Int? {
        ProcessInfo.processInfo.environment[name].flatMap { Int($0.replacingOccurrences(of: "_", with: "")) }
    }
}
