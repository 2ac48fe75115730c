import Synchronization

/// A thread-safe counter for exactly-once checks.
public final class Counter: Sendable {
    private let count = Atomic<Int>(0)

    /// Creates a counter at zero.
    public init() {}

    /// The current count.
    public var value: Int {
        count.load(ordering: .acquiring)
    }

    /// Adds one and returns the count before.
    @discardableResult
    public func increment() -> Int {
        count.add(1, ordering: .acquiringAndReleasing).oldValue
    }
}

/// What a callback saw when it ran (-1 until it ran), and how often it ran: for checks that a
/// delivery came after some other event, from any thread.
public final class Sighting: Sendable {
    private let slot = Atomic<Int>(-1)
    private let runs = Counter()

    /// Creates a sighting that has seen nothing.
    public init() {}

    /// Records one run of the callback, which saw `value`.
    public func record(_ value: Int) {
        runs.increment()
        slot.store(value, ordering: .releasing)
    }

    /// What the last run saw, or -1.
    public var value: Int { slot.load(ordering: .acquiring) }

    /// How many times the callback ran.
    public var count: Int { runs.value }
}

/// Records the order in which numbered events happen, from any threads, with atomics only.
public final class OrderRecorder: Sendable {
    private let sequence = Counter()
    private let positions: [Slot]

    private final class Slot: Sendable {
        let position = Atomic<Int>(-1)
    }

    /// Creates a recorder for events `0..<count`.
    public init(count: Int) {
        positions = (0..<count).map { _ in Slot() }
    }

    /// Records that event `index` happened now.
    public func record(_ index: Int) {
        positions[index].position.store(sequence.increment(), ordering: .releasing)
    }

    /// The events that happened, in the order they happened.
    public var order: [Int] {
        positions.indices
            .map { (event: $0, position: positions[$0].position.load(ordering: .acquiring)) }
            .filter { $0.position >= 0 }
            .sorted { $0.position < $1.position }
            .map(\.event)
    }
}
