import Synchronization

/// Counts live instances of ``LifetimeTracked`` for one test.
public final class LiveCount: Sendable {
    private let count = Atomic<Int>(0)

    /// Creates a count at zero.
    public init() {}

    /// How many tracked instances are alive.
    public var value: Int {
        count.load(ordering: .acquiring)
    }

    fileprivate func change(by delta: Int) {
        count.add(delta, ordering: .acquiringAndReleasing)
    }
}

/// An object that counts itself alive in a ``LiveCount`` while it exists: capture one in a
/// handler to check that the handler, and its captures, are released.
public final class LifetimeTracked: Sendable {
    private let live: LiveCount

    /// Creates an object counted alive in `live`.
    public init(_ live: LiveCount) {
        self.live = live
        live.change(by: 1)
    }

    deinit {
        live.change(by: -1)
    }
}
