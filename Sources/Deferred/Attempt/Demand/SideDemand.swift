public import Synchronization

/// The side units held on one hub, counted by depth: the pure half of ``SideDemand``.
///
/// A stage on the hub's path at depth `d` is needed by a side unit held at depth `d` or deeper,
/// so what matters is the deepest depth with units: a max-heap of depths answers it, each depth
/// in it at most once. A depth whose count drops to zero stays in the heap until it reaches the
/// top, where the next question drops it. A count can dip below zero for a moment, when a
/// unit's release overtakes its conversion into a side unit; only positive counts mean demand.
@usableFromInline
internal struct SideCounts {
    @usableFromInline
    internal struct Entry {
        @usableFromInline var count = 0
        @usableFromInline var isQueued = false

        @inlinable
        internal init() {}
    }

    /// The count of every depth that has units or is in ``deepest``.
    @usableFromInline
    internal var entries: [Int: Entry] = [:]

    /// The depths that had units when they were queued, deepest first.
    @usableFromInline
    internal var deepest = BinaryHeap<Int>(by: >)

    @inlinable
    internal init() {}

    /// Moves the count of `depth` by `delta`.
    @usableFromInline
    internal mutating func adjust(_ depth: Int, by delta: Int) {
        var entry = entries[depth] ?? Entry()
        entry.count += delta
        if entry.count > 0 && !entry.isQueued {
            entry.isQueued = true
            deepest.insert(depth)
        }
        entries[depth] = entry.count == 0 && !entry.isQueued ? nil : entry
    }

    /// Whether units are held at `depth` or deeper.
    @usableFromInline
    internal mutating func holds(atLeast depth: Int) -> Bool {
        while let top = deepest.first {
            var entry = entries[top] ?? Entry()
            if entry.count > 0 {
                return top >= depth
            }
            deepest.popFirst()
            entry.isQueued = false
            entries[top] = entry.count == 0 ? nil : entry
        }
        return false
    }
}

/// The side units held on one hub (see ``DemandUnit``): ``SideCounts`` behind a
/// ``SleepingLock``.
///
/// Side units are the uncommon case (a handler or a reader on a stage in the middle of a path,
/// or a second path starting there), and each operation holds the lock for a dictionary update
/// and a heap step, so the lock spins a little before it sleeps.
///
/// `@unchecked Sendable` is sound because ``counts`` is read and written only inside
/// ``withLock(_:)``, which orders every access after the previous holder's last one.
@usableFromInline
internal final class SideDemand: @unchecked Sendable {
    @usableFromInline
    internal let lock = SleepingLock()

    @exclusivity(unchecked)
    @usableFromInline
    internal var counts = SideCounts()

    @usableFromInline
    internal init() {}

    /// Runs `body` on the counts, alone.
    @usableFromInline
    internal func withLock<Result>(_ body: (inout SideCounts) -> Result) -> Result {
        lock.withLock { body(&counts) }
    }
}

extension AttemptHub {
    /// Moves the count of side units at `depth` by `delta`.
    @usableFromInline
    internal func adjustSide(_ depth: Int, by delta: Int) {
        sideDemand().withLock { $0.adjust(depth, by: delta) }
    }

    /// The hub's side units, made on first use; once stored, they stay until the hub goes.
    private func sideDemand() -> SideDemand {
        if let side = sides.load().object {
            return side
        }
        let made = SideDemand()
        return sides.storeIfEmpty(made).stored ? made : sides.load().object.unsafelyUnwrapped
    }

    /// Whether the stage at `depth` on this hub's path is still needed: the hub was not
    /// cancelled, and a path unit or a side unit at that depth or deeper is held.
    @inlinable
    internal func needs(depth: Int) -> Bool {
        let state = DemandState(bits: demand.load(ordering: .acquiring))
        if state.isCancelled {
            return false
        }
        if state.isPathHeld {
            return true
        }
        return holdsSide(atLeast: depth)
    }

    /// Whether a side unit is held at `depth` or deeper.
    @usableFromInline
    internal func holdsSide(atLeast depth: Int) -> Bool {
        guard let side = sides.load().object else {
            return false
        }
        return side.withLock { $0.holds(atLeast: depth) }
    }
}
