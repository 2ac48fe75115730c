public import Synchronization

/// The side units held on one hub, counted by depth, without a lock (see ``DemandUnit``).
///
/// A stage on the hub's path at depth `d` is needed by a side unit held at depth `d` or deeper,
/// so the question is whether any depth from `d` on has units. The counts sit in a tree of
/// 64-way nodes, made as depths are first used: a leaf counts 64 depths, an inner node keeps for
/// each child the sum of the counts below it. Depths from 64⁴ on count at the last depth
/// (a path that deep keeps the stages below its deepest side unit needed).
///
/// Lock-free and exact, because no count below a sum is ever more than the sum:
/// - a unit is added top-down (the sums, then the leaf) and released bottom-up (the leaf, then
///   the sums), so a sum is never below the counts under it;
/// - no count is ever negative: a unit is released only after it was added (``AttemptNode``
///   counts a converted unit before it publishes the conversion);
/// - so a sum of zero means every count under it is zero, and ``holds(atLeast:)`` skips that
///   subtree; a positive sum may belong to a unit still being added, and the search looks
///   below it before it answers.
///
/// `@unchecked Sendable` is sound because every field is set in `init`, and the counts and child
/// slots are atomics.
@usableFromInline
internal final class SideDemand: @unchecked Sendable {
    @usableFromInline
    internal let root = SideNode(level: SideNode.levels - 1)

    @usableFromInline
    internal init() {}

    /// Moves the count of side units at `depth` by `delta` (+1 or -1).
    @usableFromInline
    internal func adjust(_ depth: Int, by delta: Int) {
        let depth = min(depth, SideNode.depthLimit - 1)
        var node = root
        var path: [(SideNode, Int)] = []
        while node.level > 0 {
            let index = SideNode.index(of: depth, at: node.level)
            if delta > 0 {
                node.counts[index].add(delta, ordering: .releasing)
            } else {
                path.append((node, index))
            }
            node = node.child(at: index)
        }
        node.counts[SideNode.index(of: depth, at: 0)].add(delta, ordering: .acquiringAndReleasing)
        for (inner, index) in path.reversed() {
            inner.counts[index].add(delta, ordering: .releasing)
        }
    }

    /// Whether a side unit is held at `depth` or deeper.
    @usableFromInline
    internal func holds(atLeast depth: Int) -> Bool {
        root.holds(from: min(depth, SideNode.depthLimit - 1))
    }
}

/// A node of ``SideDemand``'s tree: 64 counts, and for an inner node the 64 children they sum.
@usableFromInline
internal final class SideNode: @unchecked Sendable {
    /// How many levels the tree has: it counts depths up to ``depthLimit``.
    @inlinable internal static var levels: Int { 4 }

    /// The first depth counted at the last one.
    @inlinable internal static var depthLimit: Int { 1 << (6 * levels) }

    /// 0 for a leaf, which counts depths; more for inner nodes.
    @usableFromInline
    internal let level: Int

    /// The counts: of the units at each of 64 depths (a leaf), or under each child.
    @usableFromInline
    internal let counts: UnsafeMutablePointer<Atomic<Int>>

    /// The children's retained address bits, zero until made; `nil` for a leaf.
    @usableFromInline
    internal let children: UnsafeMutablePointer<Atomic<UInt>>?

    @usableFromInline
    internal init(level: Int) {
        self.level = level
        counts = .allocate(capacity: 64)
        for index in 0..<64 {
            (counts + index).initialize(to: Atomic(0))
        }
        if level > 0 {
            let slots = UnsafeMutablePointer<Atomic<UInt>>.allocate(capacity: 64)
            for index in 0..<64 {
                (slots + index).initialize(to: Atomic(0))
            }
            children = slots
        } else {
            children = nil
        }
    }

    deinit {
        // Four levels deep at most: releasing the children recursively is bounded.
        if let children {
            for index in 0..<64 {
                let bits = children[index].load(ordering: .acquiring)
                if bits != 0 {
                    RetainedBits.release(bits, as: SideNode.self)
                }
            }
            children.deinitialize(count: 64)
            children.deallocate()
        }
        counts.deinitialize(count: 64)
        counts.deallocate()
    }

    /// The digit of `depth` that this level indexes.
    @inlinable
    internal static func index(of depth: Int, at level: Int) -> Int {
        (depth >> (6 * level)) & 63
    }

    /// The child at `index`, made now if there is none; it stays until this node goes.
    @usableFromInline
    internal func child(at index: Int) -> SideNode {
        let slot = children.unsafelyUnwrapped + index
        let existing = slot.pointee.load(ordering: .acquiring)
        if existing != 0 {
            return RetainedBits.borrow(existing, as: SideNode.self)
        }
        let made = SideNode(level: level - 1)
        let bits = RetainedBits.retain(made)
        let (exchanged, winner) = slot.pointee.compareExchange(
            expected: 0, desired: bits, ordering: .acquiringAndReleasing)
        guard exchanged else {
            RetainedBits.release(bits, as: SideNode.self)
            return RetainedBits.borrow(winner, as: SideNode.self)
        }
        return made
    }

    /// The child at `index`, if it was made.
    @usableFromInline
    internal func existingChild(at index: Int) -> SideNode? {
        let bits = children.unsafelyUnwrapped[index].load(ordering: .acquiring)
        return bits == 0 ? nil : RetainedBits.borrow(bits, as: SideNode.self)
    }

    /// Whether a unit is counted under this node at `depth` or deeper (digits below this
    /// level's decide where within it).
    @usableFromInline
    internal func holds(from depth: Int) -> Bool {
        let first = Self.index(of: depth, at: level)
        if level == 0 {
            return (first..<64).contains { counts[$0].load(ordering: .acquiring) > 0 }
        }
        if counts[first].load(ordering: .acquiring) > 0, let child = existingChild(at: first), child.holds(from: depth)
        {
            return true
        }
        return (first + 1..<64).contains { index in
            counts[index].load(ordering: .acquiring) > 0 && existingChild(at: index)?.holdsAny() == true
        }
    }

    /// Whether a unit is counted anywhere under this node.
    @usableFromInline
    internal func holdsAny() -> Bool {
        (0..<64).contains { index in
            counts[index].load(ordering: .acquiring) > 0 && (level == 0 || existingChild(at: index)?.holdsAny() == true)
        }
    }
}

extension AttemptHub {
    /// Moves the count of side units at `depth` by `delta`.
    @usableFromInline
    internal func adjustSide(_ depth: Int, by delta: Int) {
        sideDemand().adjust(depth, by: delta)
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
        return side.holds(atLeast: depth)
    }
}
