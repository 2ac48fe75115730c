public import Synchronization

/// The links of an attempt's consumers after its first (derived stages, joins, shared-run
/// callers), kept where a consumer that leaves can give its place back.
///
/// A storage's handler list is never edited, so a link stored there stays until the storage
/// decides, with everything its consumer holds, even once the consumer has left (cancelled,
/// decided by itself). An attempt therefore stores its first consumer's link in its inline slot
/// like any handler, and every later one here, in *segments*: a segment (``ConsumerSegment``) is
/// one link in the handler list that stands for a run of consumers added one after another
/// while no other handler came after it. The newest segment takes a new consumer only while its
/// own link is still the storage's newest handler (``DeferredStorage/isNewestHandler(at:)``);
/// otherwise the consumer starts a segment of its own. So every link runs where it would have
/// run in the handler list, and guarantee 3's order holds for consumers and handlers alike.
///
/// A consumer that leaves releases its unit of the attempt's demand, which counts a departure
/// here (``AnyConsumerLinks/departed(to:)``); once departures since the last compaction make up
/// half of the links and number at least 16, the one that made the share removes every link
/// whose consumer has decided. Each
/// compaction removes at least half of what it scans or resets the count of what it scanned,
/// so leaving costs O(1) amortized, and the links kept are at most twice the live ones.
///
/// One ``TableLock`` guards every segment's links: appending, a segment's run, its drop and a
/// compaction each hold it for a few array operations; no handler runs and no node is
/// released while it is held.
///
/// `@unchecked Sendable` is sound because every mutable field, here and in the segments, is
/// read and written only while `lock` is held.
@usableFromInline
internal final class ConsumerLinks<Value: Sendable>: AnyConsumerLinks, @unchecked Sendable {
    /// The newest segment, until it runs or is dropped.
    @exclusivity(unchecked)
    @usableFromInline
    internal var newest: ConsumerSegment<Value>?

    /// The older segments that still hold links, in no particular order.
    @exclusivity(unchecked)
    @usableFromInline
    internal var older: [ConsumerSegment<Value>] = []

    @inlinable
    override internal init() {}

    /// How many links the segments hold, those of consumers that left and were not removed yet
    /// included: what the tests check stays bounded.
    internal var linkCount: Int {
        lock.withLock { count }
    }

    /// Adds `handler` to the newest segment if that segment's link is still `storage`'s newest
    /// handler; otherwise starts a segment with it and stores the segment's link in `storage`.
    ///
    /// Returns a handler that `storage` handed back because it is published or orphaned, for
    /// the caller to run or drop (see ``DeferredStorage/runUnstored(_:in:)``).
    @inlinable
    internal func add<Slot>(
        _ handler: Handler<Value>, to storage: DeferredStorage<Value, Slot>
    ) -> Handler<Value>? {
        if storage.isTraced {
            storage.traceStore(handler)
        }
        let segment: ConsumerSegment<Value>? = lock.withLock {
            if let newest, newest.isOpen, let position = newest.position, storage.isNewestHandler(at: position) {
                newest.links.append(handler)
                count += 1
                return nil
            }
            let segment = ConsumerSegment(of: self, holding: handler)
            if let newest, !newest.links.isEmpty {
                newest.olderIndex = older.count
                older.append(newest)
            }
            newest = segment
            count += 1
            return segment
        }
        guard let segment else {
            return nil
        }
        var position = HandlerPosition()
        if let unstored = storage.store(.sourcedLink(segment, ConsumerSegment<Value>.run), at: &position) {
            return unstored
        }
        // Until now the segment took no link but its first: its place was unknown.
        lock.withLock { segment.position = position }
        return nil
    }

    /// Removes the links whose consumers have decided, handing their nodes to `nodes`; called
    /// with the lock held.
    @usableFromInline
    override internal func compact(to nodes: inout ReleaseStack) {
        var removed = 0
        if let newest {
            removed += newest.removeLeft(to: &nodes)
        }
        older.removeAll { segment in
            removed += segment.removeLeft(to: &nodes)
            guard segment.links.isEmpty else {
                return false
            }
            segment.olderIndex = -1
            return true
        }
        for (index, segment) in older.enumerated() {
            segment.olderIndex = index
        }
        count -= removed
    }

    /// Closes `segment` and takes its links, which the caller runs or drops.
    @inlinable
    internal func close(_ segment: ConsumerSegment<Value>) -> [Handler<Value>] {
        lock.withLock {
            segment.isOpen = false
            let links = segment.links
            segment.links = []
            count -= links.count
            if newest === segment {
                newest = nil
            } else if segment.olderIndex >= 0 {
                // Swapped out with the last: segments close in any order, each in O(1).
                let last = older.removeLast()
                if last !== segment {
                    last.olderIndex = segment.olderIndex
                    older[segment.olderIndex] = last
                }
                segment.olderIndex = -1
            }
            return links
        }
    }
}

/// A run of consumer links of one attempt, standing in its handler list as one link; see
/// ``ConsumerLinks``.
///
/// It holds its ``ConsumerLinks`` (for the lock), which holds it only until it runs or is
/// dropped, which every segment does before its attempt goes: so the two never keep each other.
///
/// `@unchecked Sendable` is sound because its mutable fields are used only while its links'
/// lock is held.
@usableFromInline
internal final class ConsumerSegment<Value: Sendable>: ChainNode, @unchecked Sendable {
    @usableFromInline
    internal let owner: ConsumerLinks<Value>

    /// The links it stands for, in the order they were added.
    @exclusivity(unchecked)
    @usableFromInline
    internal var links: [Handler<Value>]

    /// Whether it still takes links: it has neither run nor been dropped.
    @exclusivity(unchecked)
    @usableFromInline
    internal var isOpen = true

    /// Its index in its links' older segments, or -1 while it is the newest or has left them.
    @exclusivity(unchecked)
    @usableFromInline
    internal var olderIndex = -1

    /// Where its link is in the attempt's handler list, once stored.
    @exclusivity(unchecked)
    @usableFromInline
    internal var position: HandlerPosition?

    @inlinable
    internal init(of owner: ConsumerLinks<Value>, holding first: Handler<Value>) {
        self.owner = owner
        links = [first]
    }

    /// The link step of a segment: runs its links, in order, with the attempt's value.
    @inlinable
    internal static func run(_ source: ChainNode, _ node: ChainNode, _ value: Value, _ queue: inout DrainQueue) {
        let segment = ConsumerSegment.linked(node)
        for link in segment.owner.close(segment) {
            link.run(with: value, from: source, in: &queue)
        }
    }

    /// The attempt will never run the segment's link (it was orphaned, or released pending):
    /// neither will the segment run its links, whose nodes go to `nodes` as lost.
    @usableFromInline
    override internal func lostDecider(to nodes: inout ReleaseStack) {
        for link in owner.close(self) {
            link.drop(to: &nodes)
        }
    }

    @usableFromInline
    override internal func detachDownstream(to nodes: inout ReleaseStack) {
        lostDecider(to: &nodes)
    }

    /// Removes the links whose consumers have decided, keeping the others in order, and hands
    /// their nodes to `nodes` (which drops their unrun steps once no lock is held); returns how
    /// many it removed.
    @inlinable
    internal func removeLeft(to nodes: inout ReleaseStack) -> Int {
        let before = links.count
        links.removeAll { link in
            guard let node = link.linkedNode, node.hasDecided else {
                return false
            }
            nodes.push(node, kind: .removedLink)
            return true
        }
        return before - links.count
    }
}

/// The part of ``ConsumerLinks`` that is not generic: the lock, the counts and the departure,
/// so that a consumer leaving (which an unspecialized node reports) looks up no generic
/// metadata until a compaction is due, and so that releasing it in an unspecialized `deinit`
/// looks up none either.
///
/// `@unchecked Sendable` is sound because its counts are used only while `lock` is held.
@usableFromInline
internal class AnyConsumerLinks: @unchecked Sendable {
    @usableFromInline
    internal let lock = TableLock()

    /// How many links the segments hold.
    @exclusivity(unchecked)
    @usableFromInline
    internal var count = 0

    /// How many consumers left since the last compaction: counted without the lock, so that a
    /// departure that makes no compaction costs one atomic step.
    @usableFromInline
    internal let departures: Atomic<Int> = Atomic(0)

    @usableFromInline
    internal init() {}

    /// The fewest departures that make a compaction: a few links of consumers that left may
    /// wait for the next, so that one consumer leaving at a time does not scan each time.
    @inlinable
    internal static var fewestDeparturesToCompact: Int { 16 }

    /// Counts a consumer that left, and compacts once departures make up half of the links and
    /// number at least ``fewestDeparturesToCompact``, handing the removed links' nodes to
    /// `nodes`.
    @usableFromInline
    internal final func departed(to nodes: inout ReleaseStack) {
        guard departures.add(1, ordering: .relaxed).newValue >= Self.fewestDeparturesToCompact else {
            return
        }
        lock.withLock {
            let departed = departures.load(ordering: .relaxed)
            guard departed >= Self.fewestDeparturesToCompact, departed * 2 >= count else {
                return  // Compacted meanwhile, or too few yet.
            }
            departures.subtract(departed, ordering: .relaxed)
            compact(to: &nodes)
        }
    }

    /// Removes the links whose consumers have decided; called with the lock held.
    @usableFromInline
    internal func compact(to nodes: inout ReleaseStack) {}
}
