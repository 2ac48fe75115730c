import Synchronization

/// Counts live instances of ``LifetimeTracked`` for one test.
final class LiveCount: Sendable {
    private let count = Atomic<Int>(0)

    /// How many tracked instances are alive.
    var value: Int {
        count.load(ordering: .acquiring)
    }

    fileprivate func change(by delta: Int) {
        count.add(delta, ordering: .acquiringAndReleasing)
    }
}

/// An object that counts itself alive in a ``LiveCount`` while it exists: capture one in a
/// handler to check that the handler, and its captures, are released.
final class LifetimeTracked: Sendable {
    private let live: LiveCount

    init(_ live: LiveCount) {
        self.live = live
        live.change(by: 1)
    }

    deinit {
        live.change(by: -1)
    }
}
