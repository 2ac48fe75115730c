/// Decides how long a race test keeps running: the pure half of ``RaceHarness``.
///
/// A race test names the interleavings it must see (for example "the handler was added before
/// the fill" and "after"). On a busy machine one of them can be rare, so the harness runs the
/// race in batches and asks this policy after each batch whether to go on: it stops once it has
/// run at least the minimum number of rounds *and* seen every interleaving, or once the round or
/// time budget is spent. ``missing`` and ``unexpected`` then say what is still missing, and
/// what should never have happened, if anything.
///
/// It holds counts only and never looks at a clock or a thread, so it is tested on its own.
public struct InterleavingSearch: Sendable {
    /// The interleavings the test must see.
    public let expected: Set<String>

    /// Rounds to run whatever happens: every round also checks the race's hard assertions.
    public let minimumRounds: Int

    /// Rounds after which the search gives up on interleavings it has not seen.
    public let maximumRounds: Int

    /// How often each interleaving happened so far, including unexpected ones.
    public private(set) var counts: [String: Int] = [:]

    /// Rounds run so far.
    public private(set) var rounds = 0

    /// Creates a search for `expected` that runs `minimumRounds` rounds at least and
    /// `maximumRounds` at most.
    public init(expected: Set<String>, minimumRounds: Int, maximumRounds: Int) {
        precondition(minimumRounds > 0 && maximumRounds >= minimumRounds, "the round budget must hold the minimum")
        self.expected = expected
        self.minimumRounds = minimumRounds
        self.maximumRounds = maximumRounds
    }

    /// Records the interleavings of one finished batch.
    public mutating func record(_ batch: [String: Int]) {
        counts.merge(batch, uniquingKeysWith: +)
        rounds += batch.values.reduce(0, +)
    }

    /// The expected interleavings not seen yet, sorted.
    public var missing: [String] {
        expected.filter { counts[$0, default: 0] == 0 }.sorted()
    }

    /// The interleavings seen that the test did not name, sorted.
    public var unexpected: [String] {
        counts.keys.filter { !expected.contains($0) }.sorted()
    }

    /// How many rounds the next batch runs, or `nil` to stop.
    ///
    /// - Parameter timeIsUp: Whether the time budget is spent; the minimum rounds run anyway.
    /// - Returns: The size of the next batch, or `nil` if the search is over.
    public func nextBatch(timeIsUp: Bool) -> Int? {
        if rounds < minimumRounds {
            return min(Self.batchSize, minimumRounds - rounds)
        }
        guard !missing.isEmpty, !timeIsUp, rounds < maximumRounds else {
            return nil
        }
        return min(Self.batchSize, maximumRounds - rounds)
    }

    /// One line with the counts, for the log: `race NAME, N rounds: a: 3, b: 7`.
    public func summary(_ name: String) -> String {
        let counted = counts.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")
        return "race \(name), \(rounds) rounds: \(counted)"
    }

    /// Rounds per batch: small enough that a search stops soon after it has seen everything,
    /// large enough that starting the batch's threads costs nothing next to the rounds.
    public static var batchSize: Int { 2_000 }
}
