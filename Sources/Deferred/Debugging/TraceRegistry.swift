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
/// side table for each): each holds an unretained reference that is valid while the entry is
/// there, because a recorded storage's `deinit` removes its entry, under the lock, before the
/// storage's memory is freed (see ``PendingFutures/released(_:lost:)``). So a storage is read only
/// while the lock is held, and no reference taken from an entry outlives it.
///
/// `@unchecked Sendable` is sound: ``state`` is read and written only while ``lock`` is held.
internal final class TraceRegistry: @unchecked Sendable {
    /// The registry of the process.
    static let shared = TraceRegistry()

    private let lock = TableLock()
    private var state = TraceState()

    /// Runs `body` with the registry's state, alone; `body` must release no strong reference to a
    /// storage that it did not receive from its caller (that release may be the last, and the
    /// storage's `deinit` would wait for the lock).
    func withState<Result>(_ body: (inout TraceState) -> Result) -> Result {
        lock.withLock { body(&state) }
    }
}

/// The registry's state: every entry by its storage's identity, and the lints it keeps.
internal struct TraceState {
    /// The entries, by storage: each is removed when its storage goes, so a key never names a
    /// storage other than its own.
    var entries: [ObjectIdentifier: TraceEntry] = [:]

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

    /// The entry of `node`, made as a stage if there is none yet; returns whether it was made.
    @discardableResult
    mutating func ensureEntry(for node: ChainNode, role: TraceEntry.Role) -> Bool {
        let key = ObjectIdentifier(node)
        // An entry kept after its storage went (see `gaveUp`) may share the address of a new one.
        if entries[key]?.node != nil {
            return false
        }
        entries[key] = TraceEntry(node: node, role: role)
        return true
    }
}

/// What a node is to the registry when a recorded storage links it (see
/// ``ChainNode/traceKind``).
internal enum TraceNodeKind {
    /// Nothing to record: a node of the library's own (a consumer's links, a lazy view's step).
    case none
    /// A storage: a stage derived from the one it is linked to.
    case stage
    /// A join that fills `output`, a storage: the stage is the output.
    case join(output: ChainNode)
    /// A waiter of `kind` that is not a stage, named `name` on the thread that starts waiting.
    case waiter(PendingLink.Kind, String)
}

/// What the registry records of one storage.
internal struct TraceEntry {
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

    /// The storage, unretained: valid while this entry is in the registry, whose lock the reader
    /// holds; `nil` once the storage is gone (see ``gaveUp``).
    unowned(unsafe) var node: ChainNode?
    /// What it is.
    let role: Role
    /// When it was recorded.
    let since: ContinuousClock.Instant
    /// Its order among every record.
    let order: Int
    /// The name the storage was given (see `named(_:)`), if any.
    var label: String?
    /// A name that replaces the node's own, such as `timeout(5.0 seconds)`.
    var stageName: String?
    /// The first recorded storage it waits on: a stage has one; only a join has more.
    var source: ObjectIdentifier?
    /// The recorded storages it waits on after ``source``, in the order it was linked to them.
    var moreSources: [ObjectIdentifier] = []
    /// The waiters that are not stages.
    var waiters: [Waiter] = []
    /// Whether something ever received, or registered for, its value: a handler, a derived
    /// stage, a reader.
    var isObserved = false
    /// Whether it was recorded while ``PendingFutures/isTracking`` was on (``PendingFutures/all``
    /// lists those writers).
    var isTracked = false
    /// Whether the producer still holds the writer: a `DeferredAttempt` that was not released.
    var isWriterHeld = false
    /// Whether it was reported as a lost writer.
    var isLostReported = false
    /// Whether the storage gave up on its sources (a limit passed, a shared run's callers all
    /// left), when, and its name then.
    ///
    /// A source still pending is then work that still runs for nobody. Such an entry outlives its storage until no work runs above it, so that a dump
    /// reports a shared run that nothing holds any more.
    var gaveUp: (kind: PendingLint.Kind, at: ContinuousClock.Instant, name: String)?

    init(node: ChainNode, role: Role) {
        self.node = node
        self.role = role
        since = .now
        order = nextTraceOrder()
    }

    /// Every recorded storage it waits on.
    var sources: [ObjectIdentifier] {
        source.map { [$0] + moreSources } ?? []
    }

    /// Records that it waits on `key` too.
    mutating func addSource(_ key: ObjectIdentifier) {
        if source == nil {
            source = key
        } else if source != key && !moreSources.contains(key) {
            moreSources.append(key)
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
