/// The deadlines of the attempts that have one or hear of one: each one's own deadline, its
/// consumers' deadlines, and so its *needed-until*, which its producer reads (see
/// ``DeadlineRecord``).
///
/// Deadlines are rare beside the work they bound, and an attempt without one must pay nothing
/// for them: no allocation, no atomic step, no field. So the ledger keeps a record only for a
/// *tracked* attempt (a bit of its ``DemandState``): one that has a deadline of its own, has a
/// bounded consumer, derives from a tracked attempt, or whose producer asked. Whoever changes
/// what a tracked attempt's demand counts (takes a unit, pins it, releases a unit and leaves it
/// pending, ends its demand, switches the source it holds) sees the bit in the word it changes
/// anyway, and only then comes here.
///
/// Everything here runs under one lock (``TableLock``), held for dictionary operations and a walk
/// up the chain of the attempts whose needed-until changed; no user code runs under it (the
/// producers' observers run after it, in order, see ``report(_:)``) and nothing is released under
/// it (what a change drops waits in a ``Garbage``). A deadline changes what an attempt's source
/// counts, so a change walks up, iteratively, to where nothing changes any more.
///
/// Reading a tracked attempt's source is safe under the lock because its owner, after taking the
/// source out of its slot, checks the tracked bit and, finding it, comes here (and waits for the
/// lock) before releasing it. The ledger marks an attempt tracked (an atomic read-modify-write of
/// its demand word) before it reads its slot, and only reads the slot of an attempt whose demand
/// has not ended (or, for a time limit or an owner, with a read-modify-write taking it): of the
/// two, the owner's check or the ledger's read sees the other's step. Where the owner ends the
/// demand, it settles or stops the word (a read-modify-write) before it takes from the slot, so
/// the word's own order decides: a mark before the end is seen by the owner's check; a mark after
/// it sees the end, and the ledger does not read the slot. Where the owner switches its source
/// (the store-buffering shape), its exchange of the slot and its check, and the ledger's mark and
/// its read, are all sequentially consistent. `DeadlineHandshakeModelTests` checks the orders
/// over every interleaving, and that the two broken ones fail.
///
/// `@unchecked Sendable`: ``records`` and ``warnedOfMixedClocks`` are touched only under ``lock``.
@usableFromInline
internal final class DeadlineLedger: @unchecked Sendable {
    /// The one ledger.
    @usableFromInline
    internal static let shared = DeadlineLedger()

    private let lock = TableLock()

    /// The record of each tracked attempt whose demand has not ended, by the attempt's identity.
    private var records: [ObjectIdentifier: DeadlineRecord] = [:]

    /// Whether debug builds warned of deadlines on mixed clocks.
    private var warnedOfMixedClocks = false

    private init() {}

    // MARK: Events

    /// A new attempt, `node`, has its own deadline `own`, or derives from a tracked source: it is
    /// tracked from now on, and counts on its source as it should.
    ///
    /// A stage does not take on its source's own deadline: that bounds the source's result, not
    /// what comes after it (the attempt an `andThen` starts once its source succeeded, a `delay`),
    /// and for a stage that only passes its source's result on it changes nothing its source's
    /// producer reads.
    @usableFromInline
    internal func track(_ node: ChainNode, own: DeadlineMark?) {
        var garbage = Garbage()
        var reports: [DeadlineRecord] = []
        lock.withLock {
            guard let word = mark(node, garbage: &garbage), !word.isFinal else {
                return
            }
            let record = self.record(of: node)
            if let own {
                record.own = record.own.map { $0.earlier(own) } ?? own
                if record.clock == nil {
                    record.clock = own.clock
                }
            }
            reconcile(from: node, garbage: &garbage, reports: &reports)
        }
        report(reports)
        _ = garbage
    }

    /// A consumer without a deadline came to the tracked attempt `node` (a unit taken, a handler
    /// pinning it), or one left it pending (a unit released): what it counts as may change.
    @usableFromInline
    internal func consumerArrived(on node: ChainNode) {
        reconcile(node)
    }

    /// What the tracked attempt `node` counts as, or where, may have changed (an owner switched
    /// the source it holds): counts it anew, and up the chain as far as that changes anything.
    @usableFromInline
    internal func reconcile(_ node: ChainNode) {
        var garbage = Garbage()
        var reports: [DeadlineRecord] = []
        lock.withLock {
            reconcile(from: node, garbage: &garbage, reports: &reports)
        }
        report(reports)
        _ = garbage
    }

    /// The tracked attempt `node` no longer holds its source (its demand ended, or it is being
    /// released): it stops counting there, and its record goes.
    ///
    /// Its source is left as it is until its owner releases the unit it held, which tells the
    /// source's record again (see ``consumerArrived(on:)``) if that leaves the source pending.
    @usableFromInline
    internal func leave(_ node: ChainNode) {
        var garbage = Garbage()
        lock.withLock {
            guard let record = records.removeValue(forKey: ObjectIdentifier(node)) else {
                return
            }
            withdraw(record, garbage: &garbage)
            garbage.add(record)
        }
        _ = garbage
    }

    /// A bounded reader (a task awaiting `get()` under a deadline) took a unit of `node`: it
    /// counts as `mark` until ``readerLeaves(_:)``.
    ///
    /// Returns whether it counted.
    @usableFromInline
    internal func readerArrives(on node: ChainNode, until mark: DeadlineMark) -> Bool {
        var garbage = Garbage()
        var reports: [DeadlineRecord] = []
        let counted = lock.withLock {
            guard let word = self.mark(node, garbage: &garbage), !word.isFinal else {
                return false
            }
            guard count(mark, on: node) else {
                return false
            }
            reconcile(from: node, garbage: &garbage, reports: &reports)
            return true
        }
        report(reports)
        _ = garbage
        return counted
    }

    /// A reader that ``readerArrives(on:until:)`` counted is about to release its unit of `node`.
    @usableFromInline
    internal func readerLeaves(_ node: ChainNode) {
        lock.withLock {
            existingRecord(of: node)?.uncount()
        }
    }

    // MARK: What a producer reads

    /// The needed-until of `node`, which is tracked from now on; `nil` if it has none or its
    /// demand ended.
    internal func neededUntil(_ node: ChainNode) -> DeadlineMark? {
        var garbage = Garbage()
        let needed: DeadlineMark? = lock.withLock {
            guard let word = mark(node, garbage: &garbage), !word.isFinal else {
                return nil
            }
            let record = self.record(of: node)
            return effective(record, DemandState(rawValue: node.loadDemand() ?? word.rawValue))
        }
        _ = garbage
        return needed
    }

    /// The deadline of the tracked attempt `node` as a stage reads it: the earlier of its own and
    /// its consumers'; `nil` if it has none, or no record.
    @usableFromInline
    internal func deadline(of node: ChainNode) -> DeadlineMark? {
        lock.withLock {
            guard let record = existingRecord(of: node), let word = node.loadDemand() else {
                return nil
            }
            return effective(record, DemandState(rawValue: word))
        }
    }

    /// Calls `observer` with each new needed-until of `node`, starting with the current one if
    /// it has one; `node` is tracked from now on.
    internal func observe(_ node: ChainNode, _ observer: @escaping @Sendable (DeadlineMark?) -> Void) {
        var reports: [DeadlineRecord] = []
        var garbage = Garbage()
        lock.withLock {
            guard let word = mark(node, garbage: &garbage), !word.isFinal else {
                return
            }
            let record = self.record(of: node)
            record.observers.append(observer)
            let current = effective(record, DemandState(rawValue: node.loadDemand() ?? word.rawValue))
            if record.observers.count == 1 {
                record.reported = current
            }
            if current != nil {
                // The new observer learns the current one first; the others hear it again.
                record.unreported.append(current)
                if !record.reporting {
                    record.reporting = true
                    reports.append(record)
                }
            }
        }
        report(reports)
        _ = garbage
    }

    // MARK: Under the lock

    /// Marks `node` tracked and returns its demand word, marked; `nil` if it is not an attempt.
    ///
    /// The first mark drops a record left at the same identity, by an attempt released without
    /// leaving the ledger: a record is `node`'s only while `node` is tracked (see
    /// ``existingRecord(of:)``), and only the ledger marks, under its lock.
    private func mark(_ node: ChainNode, garbage: inout Garbage) -> DemandState? {
        guard let before = node.markTracked() else {
            return nil
        }
        if before & DemandState.tracked == 0, let stale = records.removeValue(forKey: ObjectIdentifier(node)) {
            garbage.add(stale)
        }
        return DemandState(rawValue: before | DemandState.tracked)
    }

    /// The record of `node`, which the caller marked; made if it has none.
    private func record(of node: ChainNode) -> DeadlineRecord {
        if let record = records[ObjectIdentifier(node)] {
            return record
        }
        let record = DeadlineRecord()
        records[ObjectIdentifier(node)] = record
        return record
    }

    /// The record of `node`, if it has one: only a tracked attempt does (one left at the same
    /// identity by an attempt released without leaving is dropped by the first ``mark(_:garbage:)``).
    private func existingRecord(of node: ChainNode) -> DeadlineRecord? {
        guard let word = node.loadDemand(), word & DemandState.tracked != 0 else {
            return nil
        }
        return records[ObjectIdentifier(node)]
    }

    /// What a producer reads: the earlier of the attempt's own deadline and its needed-until.
    private func effective(_ record: DeadlineRecord, _ demand: DemandState) -> DeadlineMark? {
        record.contribution(demand: demand)
    }

    /// Counts a bounded consumer, `mark`, on `node`; returns whether it counted (it does not if
    /// `node` is not an attempt, or keeps its deadlines on another clock).
    private func count(_ mark: DeadlineMark, on node: ChainNode) -> Bool {
        guard node.loadDemand() != nil else {
            return false
        }
        guard record(of: node).count(mark) else {
            warnOfMixedClocks()
            return false
        }
        return true
    }

    /// Undoes what `record` counted on its source.
    private func withdraw(_ record: DeadlineRecord, garbage: inout Garbage) {
        guard let countedOn = record.countedOn else {
            return
        }
        if record.counted != nil {
            countedOn.forEachCountedSource { source in
                existingRecord(of: source)?.uncount()
            }
        }
        record.countedOn = nil
        record.counted = nil
        garbage.add(countedOn)
    }

    /// Counts `start` anew on its source if what it counts as, or where, changed, then its
    /// source, and so on up: iteratively, to any depth; tells the observers of each attempt whose
    /// needed-until changed (through `reports`).
    private func reconcile(from start: ChainNode, garbage: inout Garbage, reports: inout [DeadlineRecord]) {
        var work = WorkList(start)
        while let node = work.pop() {
            guard let entry = existingRecord(of: node), let word = node.loadDemand() else {
                continue
            }
            let demand = DemandState(rawValue: word)
            guard !demand.isFinal else {
                continue  // Its end of demand withdraws what it counted.
            }
            let contribution = entry.contribution(demand: demand)
            if !entry.observers.isEmpty && contribution != entry.reported {
                entry.reported = contribution
                entry.unreported.append(contribution)
                if !entry.reporting {
                    entry.reporting = true
                    reports.append(entry)
                }
            }
            let source = node.currentSource()
            if entry.countedOn === source && entry.counted == contribution {
                continue
            }
            if let countedOn = entry.countedOn {
                withdraw(entry, garbage: &garbage)
                countedOn.forEachCountedSource { work.push($0) }
            }
            guard let source else {
                continue
            }
            guard let contribution else {
                // A consumer without a deadline there now, which may change what the source
                // counts as in turn.
                entry.countedOn = source
                source.forEachCountedSource { work.push($0) }
                continue
            }
            var mixed = false
            source.forEachCountedSource { input in
                if let clock = existingRecord(of: input)?.clock, clock != contribution.clock {
                    mixed = true
                }
            }
            if mixed {
                // It counts as a consumer without a deadline there.
                warnOfMixedClocks()
                entry.countedOn = source
                source.forEachCountedSource { work.push($0) }
                continue
            }
            source.forEachCountedSource { input in
                guard let inputWord = mark(input, garbage: &garbage) else {
                    return
                }
                if inputWord.isFinal && records[ObjectIdentifier(input)] == nil {
                    return  // Its demand ended: it needs no record.
                }
                _ = record(of: input).count(contribution)
                work.push(input)
            }
            entry.countedOn = source
            entry.counted = contribution
        }
    }

    private func warnOfMixedClocks() {
        #if DEBUG
            if !warnedOfMixedClocks {
                warnedOfMixedClocks = true
                print(
                    "Deferred: a consumer's deadline is on another clock than its attempt's other deadlines, "
                        + "so it counts as no deadline. Keep the deadlines of one graph on one clock.")
            }
        #endif
    }

    // MARK: After the lock

    /// Tells the observers of each record in `reports` what it has yet to report, in order: the
    /// thread that set its ``DeadlineRecord/reporting`` does, until nothing is left, so that
    /// observers hear every change once, in the order the changes were made.
    private func report(_ reports: [DeadlineRecord]) {
        for record in reports {
            while true {
                let next: (DeadlineMark?, [@Sendable (DeadlineMark?) -> Void])? = lock.withLock {
                    guard !record.unreported.isEmpty else {
                        record.reporting = false
                        return nil
                    }
                    return (record.unreported.removeFirst(), record.observers)
                }
                guard let (mark, observers) = next else {
                    break
                }
                for observer in observers {
                    observer(mark)
                }
            }
        }
    }
}

/// What a change of the ledger drops, kept until its lock is released.
///
/// Releasing a node can run its `deinit`, which may come to the ledger again. The first two
/// inline: most changes drop no more.
private struct Garbage {
    var first: AnyObject?
    var second: AnyObject?
    var more: [AnyObject] = []

    mutating func add(_ object: AnyObject) {
        if first == nil {
            first = object
        } else if second == nil {
            second = object
        } else {
            more.append(object)
        }
    }
}

/// The attempts a reconciliation has yet to visit: the last one pushed inline, as a chain hands
/// over one at a time (a join, several).
private struct WorkList {
    var top: ChainNode?
    var below: [ChainNode] = []

    init(_ start: ChainNode) {
        top = start
    }

    mutating func push(_ node: ChainNode) {
        if let previous = top {
            below.append(previous)
        }
        top = node
    }

    mutating func pop() -> ChainNode? {
        if let node = top {
            top = nil
            return node
        }
        return below.popLast()
    }
}
