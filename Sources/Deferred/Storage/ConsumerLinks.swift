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
/// here (``departed(to:)``); once departures since the last compaction make up half of the
/// links, the one that made the share removes every link whose consumer has decided. Each
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
internal final class ConsumerLinks<Value: Sendable>: @unchecked Sendable {
    @usableFromInline
    internal let lock = TableLock()

    /// The newest segment, until it runs or is dropped.
    private var newest: ConsumerSegment<Value>?

    /// The older segments that still hold links, oldest first.
    private var older: [ConsumerSegment<Value>] = []

    /// How many links the segments hold.
    private var count = 0

    /// How many consumers left since the last compaction.
    private var departures = 0

    @usableFromInline
    internal init() {}

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
    @usableFromInline
    internal func add<Slot>(
        _ handler: Handler<Value>, to storage: DeferredStorage<Value, Slot>
    ) -> Handler<Value>? {
        let segment: ConsumerSegment<Value>? = lock.withLock {
            if let newest, newest.isOpen, let position = newest.position, storage.isNewestHandler(at: position) {
                newest.links.append(handler)
                count += 1
                return nil
            }
            let segment = ConsumerSegment(of: self, holding: handler)
            if let newest, !newest.links.isEmpty {
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

    /// Counts a consumer that left, and compacts once departures make up half of the links,
    /// handing the removed links' nodes to `nodes` as lost.
    @usableFromInline
    internal func departed(to nodes: inout ReleaseStack) {
        var removed: [ChainNode] = []
        lock.withLock {
            departures += 1
            guard departures * 2 >= count else {
                return
            }
            departures = 0
            if let newest {
                newest.removeLeft(into: &removed)
            }
            older.removeAll { segment in
                segment.removeLeft(into: &removed)
                return segment.links.isEmpty
            }
            count -= removed.count
        }
        // Their links will never run: each node is told so, as when a storage drops its links
        // (a decided node only lets go of a step that never ran).
        nodes.reserve(removed.count)
        for node in removed {
            nodes.pushLost(node)
        }
    }

    /// Closes `segment` and takes its links, which the caller runs or drops.
    fileprivate func close(_ segment: ConsumerSegment<Value>) -> [Handler<Value>] {
        lock.withLock {
            segment.isOpen = false
            let links = segment.links
            segment.links = []
            count -= links.count
            if newest === segment {
                newest = nil
            } else if let index = older.firstIndex(where: { $0 === segment }) {
                older.remove(at: index)
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
    private let owner: ConsumerLinks<Value>

    /// The links it stands for, in the order they were added.
    fileprivate var links: [Handler<Value>]

    /// Whether it still takes links: it has neither run nor been dropped.
    fileprivate var isOpen = true

    /// Where its link is in the attempt's handler list, once stored.
    fileprivate var position: HandlerPosition?

    fileprivate init(of owner: ConsumerLinks<Value>, holding first: Handler<Value>) {
        self.owner = owner
        links = [first]
    }

    /// The link step of a segment: runs its links, in order, with the attempt's value.
    @usableFromInline
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

    /// Moves the nodes of the links whose consumers have decided into `removed`, keeping the
    /// others in order; shrinks the array once it is mostly empty.
    fileprivate func removeLeft(into removed: inout [ChainNode]) {
        let before = removed.count
        var kept: [Handler<Value>] = []
        for link in links {
            if let node = link.linkedNode, node.hasDecided {
                removed.append(node)
            } else {
                kept.append(link)
            }
        }
        if removed.count > before {
            links = kept
        }
    }
}
