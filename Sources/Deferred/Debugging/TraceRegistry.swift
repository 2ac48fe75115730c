import Dispatch
import Synchronization

/// What ``PendingFutures`` knows of the chains it records: for each recorded storage, what it
/// is, where it was made, its label, the recorded storages it waits on, and what waits on it.
///
/// A storage is recorded when it is a writer made while ``PendingFutures`` records, when it is
/// named, or when it is linked to a recorded storage (a stage derived from it: a `map`, a
/// `timeout`, a join): its ``DeferredStorage/waiterRegistry`` then has ``recordedBit`` set, so
/// the links stored on it are reported here (see ``DeferredStorage/traceStore(_:)``), and its
/// `deinit` removes its entry. That bit is the only trace kept in a node: with nothing recorded,
/// storing a handler costs a relaxed load and a branch more, and nothing else.
///
/// Entries keep their storages neither strongly nor weakly (a weak reference would allocate a
/// side table for each): an entry's key is its storage's address, valid while the entry is live,
/// because a recorded storage's `deinit` removes its entry, under the lock, before the storage's
/// memory is freed (see ``PendingFutures/released(_:lost:)``). So a storage is read only while the
/// lock is held, and without being retained (see ``readStorage(at:)``): a reference retained
/// there could turn out to be the last, and its release would run the storage's `deinit` on the
/// thread that holds the lock.
///
/// `@unchecked Sendable` is sound: ``state`` is read and written only while ``lock`` is held.
internal final class TraceRegistry: @unchecked Sendable {
    /// The registry of the process.
    static let shared = TraceRegistry()

    private let lock = TableLock()
    /// The entries, the same table as ``TraceState/entries``.
    ///
    /// Touched only under the lock.
    private let entries: AddressTable<TraceEntry>
    // Unchecked: only `withState` touches it, under the lock.
    @exclusivity(unchecked) private var state: TraceState

    private init() {
        entries = AddressTable()
        state = TraceState(entries: entries)
    }

    /// Records `entry` for the storage at `key`: the path every recorded writer takes, kept to a
    /// lock and a table insertion.
    func add(_ entry: TraceEntry, for key: UInt) {
        lock.withLock { entries[key] = entry }
    }

    /// Removes the entry of the storage at `key`, which is going away, unless it outlives its
    /// storage (see ``TraceEntry/gaveUp``); returns its writer's description if `lost` and it is
    /// a writer not yet reported: the path every recorded storage's release takes.
    func remove(_ key: UInt, lost: Bool) -> String? {
        lock.withLock { () -> String? in
            guard let entry = entries[key], entry.isLive else {
                return nil
            }
            if entry.hasGivenUp {
                entry.isLive = false  // Kept while work above it runs.
            } else {
                _ = entries.removeValue(forKey: key)
            }
            guard lost, entry.isWriter, !entry.isLostReported else {
                return nil
            }
            return entry.writerDescription
        }
    }

    /// Runs `body` with the registry's state, alone; `body` must release no strong reference to a
    /// storage that it did not receive from its caller (that release may be the last, and the
    /// storage's `deinit` would wait for the lock).
    func withState<Result>(_ body: (inout TraceState) -> Result) -> Result {
        lock.withLock { body(&state) }
    }
}

/// The registry's state: every entry by its storage's address, and the lints it keeps.
internal struct TraceState {
    /// The entries, by storage: each is removed when its storage goes, so a key never names a
    /// storage other than its own (unless the entry outlived its storage; see
    /// ``TraceEntry/gaveUp``).
    let entries: AddressTable<TraceEntry>

    init(entries: AddressTable<TraceEntry>) {
        self.entries = entries
    }

    /// The lints of nodes that are gone (lost writers, unobserved failures), newest last, at most
    /// ``keptLints``.
    var pastLints: [PendingLint] = []

    /// How many lints of each kind were counted.
    var lintCounts: [PendingLint.Kind: Int] = [:]

    /// The live lints a dump already counted, by the order of the record each is about.
    var countedLiveLints: Set<Int> = []

    /// How many past lints a dump shows.
    static let keptLints = 32

    /// Counts a lint, and keeps it for the dumps if `keeping`.
    mutating func count(_ lint: PendingLint, keeping: Bool) {
        lintCounts[lint.kind, default: 0] += 1
        if keeping {
            if pastLints.count == Self.keptLints {
                pastLints.removeFirst()
            }
            pastLints.append(lint)
        }
    }

    /// The entry of `node`, made as a stage if there is none yet.
    mutating func entry(for node: ChainNode) -> TraceEntry {
        let key = traceKey(node)
        // An entry kept after its storage went (see `gaveUp`) may share the address of a new one.
        if let existing = entries[key], existing.isLive {
            return existing
        }
        let made = TraceEntry(role: .stage)
        entries[key] = made
        return made
    }
}

/// A storage that an entry waits on: its key, and the order of its entry, which tells that entry
/// from one of a later storage at the same address.
internal struct TraceSource: Equatable {
    let key: UInt
    let order: Int
}

/// What a dump reads of a recorded storage.
internal struct TraceRead {
    /// Whether its value is still to come.
    let isPending: Bool
    /// Whether anything is registered on it.
    let isWaitedFor: Bool
    /// Its operator's name, such as `map`.
    let name: String
}

/// Reads the storage whose address is `key` (``ChainNode/traceRead()``), without retaining it.
///
/// Only under the registry's lock, for an entry whose storage is live (its `deinit` waits for
/// the lock to remove the entry). Retaining it there would be unsound: if that reference turned
/// out to be the last, the storage's `deinit` would run on this thread and wait for the lock it
/// holds. So the storage is reached through a guaranteed reference and read by one method of its
/// own, with no closure or autoclosure that could capture (and so retain) it, even unoptimized.
internal func readStorage(at key: UInt) -> TraceRead {
    Unmanaged<ChainNode>.fromOpaque(UnsafeRawPointer(bitPattern: key).unsafelyUnwrapped)
        ._withUnsafeGuaranteedRef { $0.traceRead() }
}

/// The key of `node` in the registry: its address.
@inline(__always)
internal func traceKey(_ node: AnyObject) -> UInt {
    UInt(bitPattern: ObjectIdentifier(node))
}

/// What a node is to the registry when a recorded storage links it (see
/// ``ChainNode/traceKind``).
internal enum TraceNodeKind {
    /// Nothing to record: a node of the library's own (a consumer's links, a lazy view's step).
    case none
    /// A storage: a stage derived from the one it is linked to.
    case stage
    /// A join that fills a storage of its own (``ChainNode/traceOutput``): the stage is that
    /// storage.
    case join
    /// A thread blocked in `wait`.
    case thread
    /// A task awaiting the value.
    case task
}

/// What the registry records of one storage.
///
/// A class, so that the table moves a reference and an update changes it in place. Read and
/// written only under the registry's lock.
internal final class TraceEntry {
    // Its variables are unchecked: only code holding the registry's lock touches them.
    /// What the storage is to whoever reads a dump.
    enum Role {
        /// A writer the caller made (`Deferred()`, `DeferredAttempt()`, an `Attempt` made from
        /// a result or work), at `file`, `line`.
        case writer(TraceTypeName, file: StaticString, line: UInt)
        /// A stage that a combinator made (its name comes from the node), or a storage named
        /// after it was made.
        case stage
    }

    /// A waiter that is not a stage: a callback, a blocked thread, a task.
    struct Waiter {
        /// What kind of waiter it is.
        let kind: PendingLink.Kind
        /// How a dump names it, such as `upon on DispatchQueue`.
        let name: String
        /// When it began to wait.
        let since: ContinuousClock.Instant
        /// Its order among every record, which identifies it.
        let order: Int
        /// The waiter's node, for a blocked thread or a task, held weakly.
        ///
        /// It is gone, or has given up, once the wait is over. `nil` for a callback, which waits
        /// until the fill.
        weak var node: ChainNode?
        /// Whether it is a callback, which has no node.
        let isCallback: Bool
    }

    /// Why, when and under which name a storage gave up on its sources.
    struct GaveUp {
        let kind: PendingLint.Kind
        let at: ContinuousClock.Instant
        let name: String
    }

    /// Whether the storage is still there (its address is the entry's key); `false` once it is
    /// gone, for an entry kept while work above it runs (see ``gaveUp``).
    @exclusivity(unchecked) var isLive = true
    /// What it is.
    let role: Role
    /// When it was recorded.
    let since: ContinuousClock.Instant
    /// Its order among every record.
    let order: Int
    /// The first recorded storage it waits on: a stage has one; only a join has more.
    @exclusivity(unchecked) var source: TraceSource?
    /// Whether it was recorded while ``PendingFutures/isTracking`` was on (``PendingFutures/all``
    /// lists those writers).
    @exclusivity(unchecked) var isTracked = false
    /// Whether the producer still holds the writer: a `DeferredAttempt` that was not released.
    @exclusivity(unchecked) var isWriterHeld = false
    /// Whether it was reported as a lost writer.
    @exclusivity(unchecked) var isLostReported = false
    /// What few entries have, kept apart so that making and freeing an entry stays cheap.
    @exclusivity(unchecked) private var extra: Extra?

    /// What few entries have: names, more than one source, waiters, a give-up.
    private final class Extra {
        var label: String?
        var stageName: String?
        var moreSources: [TraceSource] = []
        var waiters: [Waiter] = []
        /// How many waiters there must be before ``pruneWaiters()`` looks at them again.
        var prunedAt = 16
        var gaveUp: GaveUp?
    }

    /// ``extra``, made on first use.
    private var madeExtra: Extra {
        if let extra {
            return extra
        }
        let made = Extra()
        extra = made
        return made
    }

    /// The name the storage was given (see `named(_:)`), if any.
    var label: String? {
        get { extra?.label }
        set { madeExtra.label = newValue }
    }

    /// A name that replaces the node's own, such as `timeout(5.0 seconds)`.
    var stageName: String? {
        get { extra?.stageName }
        set { madeExtra.stageName = newValue }
    }

    /// The recorded storages it waits on after ``source``, in the order it was linked to them.
    var moreSources: [TraceSource] {
        extra?.moreSources ?? []
    }

    /// The waiters that are not stages.
    var waiters: [Waiter] {
        extra?.waiters ?? []
    }

    /// Records a waiter that is not a stage.
    func addWaiter(_ waiter: Waiter) {
        madeExtra.waiters.append(waiter)
    }

    /// Whether ``gaveUp`` is set, read without copying it.
    var hasGivenUp: Bool {
        extra?.gaveUp != nil
    }

    /// Whether the storage gave up on its sources (a limit passed, a shared run's callers all
    /// left), when, and its name then.
    ///
    /// A source still pending is then work that still runs for nobody. Such an entry outlives its
    /// storage until no work runs above it, so that a dump reports a shared run that nothing
    /// holds any more.
    var gaveUp: GaveUp? {
        get { extra?.gaveUp }
        set { madeExtra.gaveUp = newValue }
    }

    init(role: Role) {
        self.role = role
        since = .now
        order = nextTraceOrder()
    }

    /// Every recorded storage it waits on.
    var sources: [TraceSource] {
        source.map { [$0] + moreSources } ?? []
    }

    /// Records that it waits on `source` too.
    func addSource(_ added: TraceSource) {
        guard let first = source else {
            source = added
            return
        }
        if first != added && !moreSources.contains(added) {
            madeExtra.moreSources.append(added)
        }
    }

    /// Drops the waiters that are over, once they are as many as the last time it did, so that a
    /// future polled with short waits keeps no record of each; returns the waiters' nodes it had
    /// to read, for the caller to release once the registry's lock is released.
    func pruneWaiters() -> [ChainNode] {
        guard let extra, extra.waiters.count >= extra.prunedAt else {
            return []
        }
        var read: [ChainNode] = []
        extra.waiters.removeAll { waiter in
            guard !waiter.isCallback else {
                return false
            }
            guard let node = waiter.node else {
                return true
            }
            read.append(node)
            return !node.traceIsPending
        }
        extra.prunedAt = max(16, extra.waiters.count * 2)
        return read
    }
}

/// A table of objects by nonzero address: open addressing with linear probing, a multiplicative
/// hash of the address, and deletion that shifts the following entries back (no tombstones).
///
/// Faster than a `Dictionary` keyed by `ObjectIdentifier` (no seeded hashing, no value witness
/// calls, no copy-on-write checks), which matters because a tracking build records every stage it
/// makes. A class that owns its slots: only the registry's lock shares it between threads.
internal final class AddressTable<Value: AnyObject> {
    /// The keys, zero for an empty slot, then the values: `capacity` of each.
    private var keys: UnsafeMutablePointer<UInt>
    private var values: UnsafeMutablePointer<Value?>
    private var capacity: Int
    private var shift: UInt
    /// How many entries the table holds.
    private(set) var count = 0

    init() {
        capacity = 64
        shift = UInt(UInt.bitWidth - 6)
        keys = .allocate(capacity: capacity)
        keys.initialize(repeating: 0, count: capacity)
        values = .allocate(capacity: capacity)
        values.initialize(repeating: nil, count: capacity)
    }

    deinit {
        keys.deallocate()
        values.deinitialize(count: capacity)
        values.deallocate()
    }

    @inline(__always)
    private func home(_ key: UInt) -> Int {
        Int(truncatingIfNeeded: (key &* 0x9E37_79B9_7F4A_7C15) >> shift)
    }

    /// The slot of `key`, or of the empty slot where it would go.
    @inline(__always)
    private func slot(_ key: UInt) -> Int {
        var index = home(key)
        while keys[index] != 0 && keys[index] != key {
            index = (index + 1) & (capacity - 1)
        }
        return index
    }

    /// The value of `key`; setting `nil` removes it.
    subscript(key: UInt) -> Value? {
        get {
            let index = slot(key)
            return keys[index] == key ? values[index] : nil
        }
        set {
            if let newValue {
                insert(newValue, for: key)
            } else {
                _ = removeValue(forKey: key)
            }
        }
    }

    private func insert(_ value: Value, for key: UInt) {
        precondition(key != 0, "an address table has no entry for address zero")
        var index = slot(key)
        if keys[index] != key {
            if (count + 1) * 2 > capacity {
                grow()
                index = slot(key)
            }
            keys[index] = key
            count += 1
        }
        values[index] = value
    }

    /// Removes the entry of `key`; returns its value, if there was one.
    func removeValue(forKey key: UInt) -> Value? {
        var index = slot(key)
        guard keys[index] == key else {
            return nil
        }
        let removed = values[index]
        // Shift each following entry of the run back into the hole if its home allows it.
        var hole = index
        while true {
            index = (index + 1) & (capacity - 1)
            guard keys[index] != 0 else {
                break
            }
            let wanted = home(keys[index])
            // Whether `wanted` lies cyclically outside (hole, index]: then the entry may move.
            let outside = hole <= index ? (wanted <= hole || wanted > index) : (wanted <= hole && wanted > index)
            if outside {
                keys[hole] = keys[index]
                values[hole] = values[index]
                hole = index
            }
        }
        keys[hole] = 0
        values[hole] = nil
        count -= 1
        return removed
    }

    private func grow() {
        let oldKeys = keys
        let oldValues = values
        let oldCapacity = capacity
        capacity *= 2
        shift -= 1
        keys = .allocate(capacity: capacity)
        keys.initialize(repeating: 0, count: capacity)
        values = .allocate(capacity: capacity)
        values.initialize(repeating: nil, count: capacity)
        count = 0
        for index in 0..<oldCapacity where oldKeys[index] != 0 {
            insert(oldValues[index].unsafelyUnwrapped, for: oldKeys[index])
        }
        oldKeys.deallocate()
        oldValues.deinitialize(count: oldCapacity)
        oldValues.deallocate()
    }

    /// Calls `body` with each key and value, in no particular order.
    func forEachEntry(_ body: (UInt, Value) -> Void) {
        for index in 0..<capacity where keys[index] != 0 {
            body(keys[index], values[index].unsafelyUnwrapped)
        }
    }
}

/// A writer's type, formatted only when a report names it: making a type's name costs far more
/// than recording it.
@usableFromInline
internal enum TraceTypeName {
    /// `Deferred<Value>`.
    case deferred(Any.Type)
    /// `DeferredAttempt<Success, Failure>`.
    case deferredAttempt(success: Any.Type, failure: Any.Type)
    /// `Attempt<Success, Failure>`, made from a result or from work rather than by a writer.
    case attempt(success: Any.Type, failure: Any.Type)

    /// The name, such as `DeferredAttempt<Data, any Error>`.
    var text: String {
        switch self {
        case .deferred(let value):
            "Deferred<\(value)>"
        case .deferredAttempt(let success, let failure):
            "DeferredAttempt<\(success), \(Self.failureName(failure))>"
        case .attempt(let success, let failure):
            "Attempt<\(success), \(Self.failureName(failure))>"
        }
    }

    private static func failureName(_ failure: Any.Type) -> String {
        failure == (any Error).self ? "any Error" : "\(failure)"
    }
}

/// The order of the records, across scopes and the registry.
private let traceOrder = Atomic<Int>(0)

/// The next number in the order of the records.
internal func nextTraceOrder() -> Int {
    traceOrder.add(1, ordering: .relaxed).newValue
}
