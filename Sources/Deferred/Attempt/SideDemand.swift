public import Synchronization

/// The side units held on one hub, counted by depth: a list that only grows, with one entry per
/// depth, whose counts move atomically.
///
/// A stage on the path at depth `d` is needed by a side unit if one is held at a depth of `d` or
/// more. Side units are rare (a handler or a reader on a stage in the middle of a path, or a
/// second path starting there), so the list stays short; entries are never removed while the
/// hub lives, so a reader can walk it without taking references, and a new depth is pushed with
/// one compare-and-swap after checking, again, the entries pushed meanwhile, so each depth
/// appears once. A count can dip below zero for a moment when a unit's release overtakes its
/// conversion into a side unit; only positive counts mean demand.
@usableFromInline
internal final class SideDemand: Sendable {
    @usableFromInline
    internal let depth: Int

    @usableFromInline
    internal let count: Atomic<Int>

    @usableFromInline
    internal let next: SideDemand?

    @usableFromInline
    internal init(depth: Int, count: Int, next: SideDemand?) {
        self.depth = depth
        self.count = Atomic(count)
        self.next = next
    }

    /// The entry for `depth` among the entries from `first` down to (not including) `end`.
    @usableFromInline
    internal static func entry(for depth: Int, from first: SideDemand?, to end: SideDemand?) -> SideDemand? {
        var current = first
        while let entry = current, entry !== end {
            if entry.depth == depth {
                return entry
            }
            current = entry.next
        }
        return nil
    }

    /// Whether a side unit is held at `depth` or deeper, among the entries from `first` on.
    @usableFromInline
    internal static func holds(atLeast depth: Int, from first: SideDemand?) -> Bool {
        var current = first
        while let entry = current {
            if entry.depth >= depth && entry.count.load(ordering: .acquiring) > 0 {
                return true
            }
            current = entry.next
        }
        return false
    }
}

extension AttemptHub {
    /// Moves the count of side units at `depth` by `delta`.
    @usableFromInline
    internal func adjustSide(_ depth: Int, by delta: Int) {
        var first = sides.load().object
        var end: SideDemand?
        while true {
            if let entry = SideDemand.entry(for: depth, from: first, to: end) {
                entry.count.add(delta, ordering: .acquiringAndReleasing)
                return
            }
            let made = SideDemand(depth: depth, count: delta, next: first)
            let (replaced, current) = sides.replace(first, with: made)
            if replaced {
                return
            }
            // Pushed meanwhile: check only those entries, then push in front of them.
            end = first
            first = current
        }
    }

    /// Whether the stage at `depth` on this hub's path is still needed: the hub was not
    /// cancelled, and the path unit or a side unit at that depth or deeper is held.
    @inlinable
    internal func needs(depth: Int) -> Bool {
        let state = DemandState(rawValue: demand.load(ordering: .acquiring))
        if state.isCancelled {
            return false
        }
        if state.isPathHeld {
            return true
        }
        return SideDemand.holds(atLeast: depth, from: sides.load().object)
    }
}
