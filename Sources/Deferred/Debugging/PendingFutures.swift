import Dispatch
public import Synchronization

/// Which futures are still waiting for their value, where they were made, what they wait on
/// and who waits for them: the answer to "why hasn't this filled?".
///
/// Nothing is recorded until you ask. Two ways to ask:
///
/// - In a running app, set ``isTracking`` to `true` (say, in a debug build's launch code); from
///   then on every ``Deferred`` and ``DeferredAttempt`` records where it was made, and ``all``
///   lists those still unfilled and still referenced, with the place each was made and whether
///   anything waits for it. `debugDescription` of such a future says where it was made too.
/// - In a test, wrap the code in ``madeDuring(_:)-(()->Result)``, or mark the test with the
///   `leavesNoPendingFutures` trait of the DeferredTesting module: the writers made inside it
///   that are not filled when it returns are reported, even ones whose every copy was dropped.
///
/// ```swift
/// let (_, pending) = PendingFutures.madeDuring {
///     _ = service.profile(id: 0)
/// }
/// print(pending)  // [Deferred<Profile> made at App/ProfileService.swift:31, with no reader]
/// ```
///
/// ``dump()`` prints every pending chain: each writer that is not filled, the stages derived from
/// it, and what waits at the end, each with its age; then the lints, the problems it noticed
/// (see ``PendingLint``):
///
/// ```text
/// Pending futures: 1 chain
///   Deferred<Profile> "profile 42" made at App/ProfileService.swift:31, 3.2 s ← map ← timeout(5.0 seconds) ← task "Load profile" (priority medium), 3.1 s
/// ```
///
/// The writers a caller makes are recorded (`Deferred()` and `DeferredAttempt()`, also through
/// `Future { deferred in … }` and `Attempt { writer in … }`, and attempts made from a result or
/// from work), then every stage a combinator derives from a recorded one, and whatever waits on
/// them: callbacks with their executor, blocked threads, tasks with their name and priority.
/// ``all`` lists the writers alone. Code that ``madeDuring(_:)-(()->Result)`` runs on other
/// threads or queues is not part of the scope. Give a future a name with `named(_:)` (or
/// `Deferred(named:)`) to tell it apart in a dump.
///
/// With tracking off and no scope running anywhere, making a writer costs one relaxed atomic load
/// more, and adding a handler a relaxed load of the storage's own word; while a scope runs (in
/// any test, say), making a writer costs a task-local lookup too. Nothing else is paid, and no
/// future grows by a byte.
public enum PendingFutures {
    /// Whether every writer made from now on records where it was made, for ``all`` and
    /// ``dump()``.
    ///
    /// Off by default. Recording takes a lock and an entry per writer, derived stage and waiter;
    /// leave it off in production.
    public static var isTracking: Bool {
        get { globalTracking.load(ordering: .relaxed) }
        set {
            if newValue != globalTracking.exchange(newValue, ordering: .relaxed) {
                trackingSwitch.add(newValue ? 1 : -1, ordering: .relaxed)
            }
        }
    }

    /// The writers made while ``isTracking`` was on that are still unfilled and still
    /// referenced, oldest first.
    public static var all: [PendingFuture] {
        // The futures are read, and the references taken to read them released, outside the
        // lock: a release may be the last, and a storage's `deinit` may report to the registry.
        let (nodes, graph) = snapshot()
        let writers = nodes.filter { $0.read.isTracked && $0.isWriter }.sorted { $0.read.order < $1.read.order }
        return writers.compactMap { PendingFuture($0, in: graph) }
    }

    /// The writers made so far, on this thread or in this task, inside the innermost running
    /// ``madeDuring(_:)-(()->Result)``, that are still unfilled, oldest first, each with its
    /// chains; empty outside any.
    ///
    /// What the `reportsStuckFutures(after:)` trait of the DeferredTesting module reports of a
    /// test that runs too long.
    public static var pendingInScope: [PendingFuture] {
        guard let scope = $scope.get() else {
            return []
        }
        return scope.pending()
    }

    /// Every pending chain of the recorded futures, and the lints, as data; ``dump()`` prints
    /// the same.
    public static var snapshotDump: PendingDump {
        let (nodes, graph) = snapshot()
        let live = graph.lints(longWait: longWaitThreshold)
        let linted = Set(live.map(\.order))
        let finished = nodes.filter { $0.read.isGone && !linted.contains($0.read.order) }.map(\.read.key)
        let past = TraceRegistry.shared.withState { state in
            for (lint, order) in live where state.countedLiveLints.insert(order).inserted {
                state.count(lint, keeping: false)
            }
            // No work runs above these any more: their storages are gone, and so is the lint.
            for key in finished where state.entries[key]?.isLive == false {
                _ = state.entries.removeValue(forKey: key)
            }
            return state.pastLints
        }
        return PendingDump(chains: graph.chains(), lints: past + live.map(\.lint))
    }

    /// Prints every pending chain of the recorded futures, and the lints, and returns them.
    ///
    /// Each chain is one line, from the writer that is not filled down through the stages
    /// derived from it to what waits (see ``PendingChain``); a writer with two readers makes two
    /// chains. The lints follow: the last 32 of futures that are gone (lost writers, failures
    /// nobody observed), then those of futures still pending (limits that passed while their
    /// work still runs, shared runs whose callers all left, waits longer than
    /// ``longWaitThreshold``).
    ///
    /// - Returns: What it printed, as data.
    @discardableResult
    public static func dump() -> PendingDump {
        let dump = snapshotDump
        print(dump)
        return dump
    }

    /// How long something may wait for a recorded future before ``dump()`` reports it as a
    /// ``PendingLint/Kind/longWait``; `nil` (the default) reports none.
    public static var longWaitThreshold: Duration? {
        get {
            let nanoseconds = longWaitNanoseconds.load(ordering: .relaxed)
            return nanoseconds < 0 ? nil : .nanoseconds(nanoseconds)
        }
        set {
            longWaitNanoseconds.store(newValue.map { Int64(max(0, $0.clampedNanoseconds)) } ?? -1, ordering: .relaxed)
        }
    }

    /// How many lints of `kind` were reported in this process: lost writers and unobserved
    /// failures as their futures went; limits and shared runs that gave up on work that still
    /// runs, and long waits, as a dump first found them.
    ///
    /// - Parameter kind: The kind of lint.
    /// - Returns: How many were reported.
    public static func lintCount(_ kind: PendingLint.Kind) -> Int {
        if kind == .lostWriter {
            return lostCount.load(ordering: .relaxed)
        }
        return TraceRegistry.shared.withState { $0.lintCounts[kind] ?? 0 }
    }

    /// Runs `body`, and returns its result with the writers it made, on this thread or in this
    /// task, that are still unfilled when it returns, oldest first.
    ///
    /// The writers are kept until `body` returns, so one whose every copy was dropped unfilled is
    /// reported too.
    ///
    /// - Parameter body: The code to watch.
    /// - Returns: What `body` returned, and the futures it left pending.
    public static func madeDuring<Result>(_ body: () throws -> Result) rethrows -> (
        result: Result, pending: [PendingFuture]
    ) {
        let scope = Scope(parent: $scope.get())
        trackingSwitch.add(1, ordering: .relaxed)
        openScopes.add(1, ordering: .relaxed)
        defer {
            openScopes.subtract(1, ordering: .relaxed)
            trackingSwitch.subtract(1, ordering: .relaxed)
        }
        let result = try $scope.withValue(scope) { try body() }
        return (result, scope.close())
    }

    /// Runs `body`, and returns its result with the writers it made, in this task, that are
    /// still unfilled when it returns, oldest first.
    ///
    /// See ``madeDuring(_:)-(()->Result)``.
    ///
    /// - Parameters:
    ///   - isolation: The actor `body` runs on: the caller's.
    ///   - body: The code to watch.
    /// - Returns: What `body` returned, and the futures it left pending.
    public static func madeDuring<Result>(
        isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> Result
    ) async rethrows -> (result: Result, pending: [PendingFuture]) {
        let scope = Scope(parent: $scope.get())
        trackingSwitch.add(1, ordering: .relaxed)
        openScopes.add(1, ordering: .relaxed)
        defer {
            openScopes.subtract(1, ordering: .relaxed)
            trackingSwitch.subtract(1, ordering: .relaxed)
        }
        let result = try await $scope.withValue(scope) { try await body() }
        return (result, scope.close())
    }

    /// Whether a lost writer stops the program instead of printing its report.
    ///
    /// While ``isTracking`` is on, a recorded writer that goes away unfilled while handlers or
    /// derived futures are registered on it (a `Deferred` whose every copy is released, a
    /// `DeferredAttempt` whose failure type cannot say "abandoned") is reported:
    ///
    /// ```text
    /// Deferred: Deferred<Profile> made at App/ProfileService.swift:31 was released unfilled while
    /// handlers or derived futures were registered on it; they will never run.
    /// ```
    ///
    /// A derived future counts even if nothing holds it any more: its source still has its
    /// registration, and a writer lost unfilled is the producer's bug either way.
    ///
    /// By default the report is printed (the first ten in a process) and counted in
    /// ``lostWriterCount``; set this to `true` to stop at the first one instead. A blocked thread
    /// or a task waiting for a `Deferred` holds it, so it is never released: ``all`` lists it.
    public static var trapsOnLostWriters: Bool {
        get { trapSwitch.load(ordering: .relaxed) }
        set { trapSwitch.store(newValue, ordering: .relaxed) }
    }

    /// How many lost writers were reported in this process (see ``trapsOnLostWriters``).
    public static var lostWriterCount: Int {
        lostCount.load(ordering: .relaxed)
    }

    // MARK: What the library reports

    /// Forgets `future`, a recorded storage that is going away, and reports it if it was `lost`:
    /// a writer released unfilled while handlers or derived futures were registered on it.
    internal static func released(_ future: AnyObject, lost: Bool) {
        if let report = TraceRegistry.shared.remove(traceKey(future), lost: lost) {
            self.report(report, "was released unfilled while handlers or derived futures were registered on it")
        }
    }

    /// Reports the recorded writer of `future`, an attempt that something waits for.
    ///
    /// Its `DeferredAttempt` went away while its failure type cannot say "abandoned", which
    /// orphans the attempt.
    internal static func writerLost(_ future: AnyObject) {
        let key = traceKey(future)
        let report = TraceRegistry.shared.withState { state -> String? in
            guard let entry = state.entries[key], entry.isWriter, !entry.isLostReported else {
                return nil
            }
            entry.isLostReported = true
            return entry.writerDescription
        }
        if let report {
            self.report(report, "lost its writer unfinished while handlers or derived attempts were registered on it")
        }
    }

    /// Prints or traps on a lost writer, described as `writer`, that `what` happened to.
    private static func report(_ writer: String, _ what: String) {
        guard globalTracking.load(ordering: .relaxed) else {
            return
        }
        let message = "\(writer) \(what); they will never run."
        if trapsOnLostWriters {
            fatalError(message)
        }
        let number = lostCount.add(1, ordering: .relaxed).newValue
        TraceRegistry.shared.withState { $0.count(PendingLint(kind: .lostWriter, message: message), keeping: true) }
        if number <= 10 {
            print("Deferred: " + message + (number == 10 ? " (Further reports are only counted.)" : ""))
        }
    }

    /// Reports `node`, a recorded attempt that failed with `failure` (not cancelled, not
    /// abandoned) and is going away, and whose failure nothing received.
    internal static func releasedFailed(_ node: ChainNode, failure: String) {
        let key = traceKey(node)
        let name = node.traceName
        let lint = TraceRegistry.shared.withState { state -> PendingLint? in
            guard let entry = state.entries[key] else {
                return nil
            }
            let lint = PendingLint(
                kind: .unobservedFailure,
                message:
                    "\(entry.describe(operatorName: name)) failed with \(failure) and was released with nobody observing its failure"
            )
            state.count(lint, keeping: true)
            return lint
        }
        if let lint, globalTracking.load(ordering: .relaxed) {
            let number = unobservedCount.add(1, ordering: .relaxed).newValue
            if number <= 10 {
                print("Deferred: " + lint.message + (number == 10 ? " (Further reports are only counted.)" : ""))
            }
        }
    }

    /// Records that `node`, a recorded storage, gave up on its sources for `kind`'s reason (a
    /// limit passed, a shared run's callers all left): a dump reports it while work above it
    /// still runs.
    @usableFromInline
    internal static func gaveUp(_ node: ChainNode, _ kind: PendingLint.Kind) {
        let key = traceKey(node)
        let name = node.traceName
        TraceRegistry.shared.withState { state in
            if let entry = state.entries[key] {
                entry.gaveUp = TraceEntry.GaveUp(kind: kind, at: .now, name: entry.describe(operatorName: name))
            }
        }
    }

    /// Records that the writer of `node`, a recorded attempt, was released: its producer is done
    /// with it.
    @usableFromInline
    internal static func writerReleased(_ node: ChainNode) {
        let key = traceKey(node)
        TraceRegistry.shared.withState { $0.entries[key]?.isWriterHeld = false }
    }

    /// Names `node`, a storage: it is recorded from now on if it was not (when anything records).
    @usableFromInline
    internal static func name(_ node: ChainNode, _ label: String) {
        // As a writer is recorded: while tracking, or in a scope around this code.
        guard
            globalTracking.load(ordering: .relaxed) || (openScopes.load(ordering: .relaxed) != 0 && $scope.get() != nil)
        else {
            return
        }
        TraceRegistry.shared.withState { $0.entry(for: node).label = label }
        // What was registered on it before it was recorded observed it all the same.
        if node.traceIsWaitedFor {
            node.markObserved()
        }
        node.markTraced()
    }

    /// Gives `node`, a recorded stage, the name `name` in dumps instead of its operator's alone,
    /// such as `timeout(5.0 seconds)`.
    @usableFromInline
    internal static func rename(_ node: ChainNode, _ name: @autoclosure () -> String) {
        let key = traceKey(node)
        let name = name()
        TraceRegistry.shared.withState { $0.entries[key]?.stageName = name }
    }

    /// Records that something read the value of `node`, a recorded storage.
    @usableFromInline
    internal static func observed(_ node: ChainNode) {
        node.markObserved()
    }

    /// Records `node`, linked to `source`, a recorded storage: a stage derived from it (which is
    /// recorded in turn), a join's output, or a waiter.
    @usableFromInline
    internal static func linked(_ node: ChainNode, to source: ChainNode) {
        switch node.traceKind {
        case .none:
            observed(source)
        case .stage:
            link(node, named: nil, to: source)
        case .join:
            if let output = node.traceOutput {
                link(output, named: node.traceName, to: source)
            }
        case .thread:
            addWaiter(.thread, "thread blocked in wait", node: node, to: source)
        case .task:
            addWaiter(.task, currentTaskDescription(), node: node, to: source)
        }
    }

    /// Records `stage`, a storage that waits on the recorded storage `source`, named `name` if
    /// it is a join's output.
    private static func link(_ stage: ChainNode, named name: String?, to source: ChainNode) {
        let sourceKey = traceKey(source)
        let name = name ?? source.traceDependentName
        TraceRegistry.shared.withState { state in
            guard let sourceEntry = state.entries[sourceKey] else {
                return
            }
            let entry = state.entry(for: stage)
            if let name, entry.stageName == nil {
                entry.stageName = name
            }
            entry.addSource(TraceSource(key: sourceKey, order: sourceEntry.order))
        }
        stage.markTraced()
    }

    /// Records a waiter of kind `kind` named `name` (its node, if it has one) on the recorded
    /// storage `source`.
    private static func addWaiter(_ kind: PendingLink.Kind, _ name: String, node: ChainNode?, to source: ChainNode) {
        let waiter = TraceEntry.Waiter(
            kind: kind, name: name, since: .now, order: nextTraceOrder(), node: node, isCallback: node == nil)
        let key = traceKey(source)
        let read = TraceRegistry.shared.withState { state -> [ChainNode] in
            guard let entry = state.entries[key] else {
                return []
            }
            entry.addWaiter(waiter)
            return entry.pruneWaiters()
        }
        // The waiters' nodes that pruning read are released here, outside the lock: a release
        // may be the last, and a waiter may hold a unit of a storage that reports here.
        withExtendedLifetime(read) {}
    }

    /// Records a callback on `executor` registered on `source`, a recorded storage.
    internal static func addCallback(on executor: any Executor, to source: ChainNode) {
        let name: String
        if executor is ImmediateExecutor {
            name = "upon on .immediate"
        } else if let queue = executor as? DispatchQueue {
            name = "upon on DispatchQueue \"\(queue.label)\""
        } else {
            name = "upon on \(type(of: executor))"
        }
        // An awaiting task's continuation is resumed by such a callback (`await future.value`):
        // say which task added it.
        let fromTask = withUnsafeCurrentTask { $0 != nil } ? ", from " + currentTaskDescription() : ""
        addWaiter(.callback, name + fromTask, node: nil, to: source)
    }

    /// The task running this code as a dump names it: `task "Load profile" (priority medium)`.
    internal static func currentTaskDescription() -> String {
        let name = Task.name.map { " \"\($0)\"" } ?? ""
        let priority = Task.currentPriority
        let priorityName =
            switch priority {
            case .high: "high"
            case .medium: "medium"
            case .low: "low"
            case .background: "background"
            default: "\(priority.rawValue)"
            }
        return "task\(name) (priority \(priorityName))"
    }

    /// Whether anything is recorded: ``isTracking``, or a ``madeDuring(_:)-(()->Result)`` running.
    @inlinable
    internal static var isRecording: Bool {
        trackingSwitch.load(ordering: .relaxed) != 0
    }

    /// Records `future`, a writer of `typeName` just made at `file`, `line`: in every open
    /// ``madeDuring(_:)-(()->Result)`` scope around this code, and in the registry.
    @usableFromInline
    internal static func record(
        _ future: some TrackedFuture, typeName: TraceTypeName, file: StaticString, line: UInt
    ) {
        // The task-local lookup only while a scope runs somewhere.
        let innermost = openScopes.load(ordering: .relaxed) != 0 ? $scope.get() : nil
        let tracking = globalTracking.load(ordering: .relaxed)
        guard innermost != nil || tracking else {
            return
        }
        let entry = TraceEntry(role: .writer(typeName, file: file, line: line))
        entry.isTracked = tracking
        if case .deferredAttempt = typeName {
            entry.isWriterHeld = true
        }
        TraceRegistry.shared.add(entry, for: traceKey(future))
        future.markRecorded()
        var scope = innermost
        while let open = scope {
            open.add(future, order: entry.order)
            scope = open.parent
        }
    }

    /// Records `node`, the attempt of an `Attempt` made at `file`, `line` from a result or from
    /// work, as ``record(_:typeName:file:line:)`` records a writer.
    @usableFromInline
    internal static func recordAttempt<Success, Failure>(
        _ node: AttemptNode<Success, Failure>, file: StaticString, line: UInt
    ) {
        record(node, typeName: .attempt(success: Success.self, failure: Failure.self), file: file, line: line)
    }

    /// Where `future` was made, if it was recorded as a writer.
    internal static func place(of future: AnyObject) -> String? {
        guard isRecording else {
            return nil
        }
        let key = traceKey(future)
        return TraceRegistry.shared.withState { $0.entries[key]?.place }
    }

    /// What the registry records, read under its lock, with the graph of what was pending.
    fileprivate static func snapshot() -> (nodes: [SnapshotNode], graph: PendingGraph<UInt>) {
        let now = ContinuousClock.now
        // Read under the lock without retaining a storage (see `readStorage(at:)`); the
        // waiters' weak references are copied there and read here, outside it.
        let read = TraceRegistry.shared.withState { state in
            var read: [SnapshotNode.Read] = []
            read.reserveCapacity(state.entries.count)
            state.entries.forEachEntry { key, entry in
                read.append(SnapshotNode.Read(key: key, entry: entry))
            }
            return read
        }
        let orders = Dictionary(read.map { ($0.key, $0.order) }, uniquingKeysWith: { first, _ in first })
        let nodes = read.map { SnapshotNode($0, orders: orders, now: now) }
        return (nodes, PendingGraph(nodes.map(\.graphNode)))
    }

    /// The scope of the innermost ``madeDuring(_:)-(()->Result)`` on this thread or task.
    @TaskLocal private static var scope: Scope?
}

/// What the registry records of one storage, as a dump reads it.
private struct SnapshotNode {
    /// What is read of an entry and its storage under the registry's lock.
    struct Read {
        let key: UInt
        let order: Int
        let isTracked: Bool
        let role: TraceEntry.Role
        let label: String?
        let name: String
        let since: ContinuousClock.Instant
        let sources: [TraceSource]
        let waiters: [TraceEntry.Waiter]
        let gaveUp: TraceEntry.GaveUp?
        let isWriterHeld: Bool
        let isGone: Bool
        let isFilled: Bool
        let isWaitedFor: Bool

        /// Reads `entry` and its storage, whose address is `key`; only under the registry's lock.
        init(key: UInt, entry: TraceEntry) {
            self.key = key
            order = entry.order
            isTracked = entry.isTracked
            role = entry.role
            label = entry.label
            since = entry.since
            sources = entry.sources
            waiters = entry.waiters
            gaveUp = entry.gaveUp
            isWriterHeld = entry.isWriterHeld
            isGone = !entry.isLive
            if entry.isLive {
                let storage = readStorage(at: key)
                isFilled = !storage.isPending
                isWaitedFor = storage.isWaitedFor
                name = entry.stageName ?? storage.name
            } else {
                (isFilled, isWaitedFor, name) = (true, false, entry.stageName ?? entry.gaveUp?.name ?? "stage")
            }
        }
    }

    /// What was read of the entry and its storage.
    let read: Read
    /// The node of the dump's graph.
    let graphNode: PendingGraph<UInt>.Node

    /// The node of `read`, whose sources count only if their entries are the ones it linked to
    /// (`orders`: each entry's order by key), listed at `now`.
    init(_ read: Read, orders: [UInt: Int], now: ContinuousClock.Instant) {
        self.read = read
        let isPending = !read.isFilled
        let link: PendingLink
        if case .writer(let typeName, let file, let line) = read.role {
            link = PendingLink(
                kind: .writer, name: typeName.text, label: read.label, place: "\(file):\(line)", age: now - read.since)
        } else {
            link = PendingLink(kind: .stage, name: read.name, label: read.label, age: now - read.since)
        }
        graphNode = PendingGraph.Node(
            key: read.key, order: read.order, isPending: isPending, workRuns: isPending || read.isWriterHeld,
            link: link,
            // A source whose storage went and whose address a later storage took is not this one's.
            sources: read.sources.filter { orders[$0.key] == $0.order }.map(\.key),
            waiters: read.waiters.compactMap { waiter in
                guard waiter.isCallback || (waiter.node?.traceIsPending ?? false) else {
                    return nil
                }
                return (PendingLink(kind: waiter.kind, name: waiter.name, age: now - waiter.since), waiter.order)
            },
            gaveUp: read.gaveUp.map { ($0.kind, now - $0.at, $0.name) })
    }

    /// Whether it is a writer.
    var isWriter: Bool {
        if case .writer = read.role { true } else { false }
    }
}

/// A future still waiting for its value, as ``PendingFutures`` lists it.
public struct PendingFuture: Sendable, Equatable, CustomStringConvertible {
    /// The writer's type, such as `Deferred<Int>` or `DeferredAttempt<Data, any Error>`.
    public let typeName: String

    /// The file where it was made (`#fileID`).
    public let file: String

    /// The line where it was made.
    public let line: UInt

    /// Whether anything waited for it when it was listed: a handler, a derived future, a blocked
    /// thread or an awaiting task.
    ///
    /// A blocking wait or a `get()` that gave up stays registered
    /// until the future is filled, and counts.
    public let isWaitedFor: Bool

    /// The name it was given with `named(_:)` or `Deferred(named:)`, if any.
    public let label: String?

    /// Its pending chains when it was listed: one for each path from it through the stages
    /// derived from it to what waits (see ``PendingChain``); one chain of the writer alone if
    /// nothing does.
    public let chains: [PendingChain]

    /// Creates a description of a pending future: a writer of `typeName` made at `file`,
    /// `line`, which something waits for if `isWaitedFor`.
    ///
    /// - Parameters:
    ///   - typeName: The writer's type, such as `Deferred<Int>`.
    ///   - file: The file where it was made.
    ///   - line: The line where it was made.
    ///   - isWaitedFor: Whether anything waits for it.
    ///   - label: The name it was given, if any.
    ///   - chains: Its pending chains.
    public init(
        typeName: String, file: String, line: UInt, isWaitedFor: Bool, label: String? = nil, chains: [PendingChain] = []
    ) {
        self.typeName = typeName
        self.file = file
        self.line = line
        self.isWaitedFor = isWaitedFor
        self.label = label
        self.chains = chains
    }

    /// The report of a recorded writer, or `nil` if it is filled.
    fileprivate init?(_ snapshot: SnapshotNode, in graph: PendingGraph<UInt>) {
        let held = snapshot.read
        guard case .writer(let typeName, let file, let line) = held.role, !held.isFilled else {
            return nil
        }
        self.init(
            typeName: typeName.text, file: "\(file)", line: line, isWaitedFor: held.isWaitedFor,
            label: held.label, chains: graph.chains(from: held.key))
    }

    /// Whether two descriptions describe the same writer the same way: its type, its place,
    /// whether it is waited for, and its label; its chains, with their ages, are not compared.
    public static func == (lhs: PendingFuture, rhs: PendingFuture) -> Bool {
        lhs.typeName == rhs.typeName && lhs.file == rhs.file && lhs.line == rhs.line
            && lhs.isWaitedFor == rhs.isWaitedFor && lhs.label == rhs.label
    }

    /// Describes the future: its type, its name, where it was made, and whether anything waits
    /// for it.
    public var description: String {
        let name = label.map { " \"\($0)\"" } ?? ""
        return "\(typeName)\(name) made at \(file):\(line), \(isWaitedFor ? "waited for" : "with no reader")"
    }
}

/// What ``PendingFutures`` needs to know of a recorded writer's storage.
@usableFromInline
internal protocol TrackedFuture: ChainNode, Sendable {
    /// Whether the value is there.
    var isTrackedFilled: Bool { get }

    /// Whether handlers (of readers, derived futures, waiters) wait for the value.
    var isTrackedWaitedFor: Bool { get }

    /// Makes the storage tell ``PendingFutures`` when it goes, and report the links stored on it.
    func markRecorded()
}

extension DeferredStorage: TrackedFuture {
    @usableFromInline
    internal var isTrackedFilled: Bool {
        StorageState(rawValue: state.load(ordering: .acquiring)).isFilled
    }

    @usableFromInline
    internal var isTrackedWaitedFor: Bool {
        StorageState(rawValue: state.load(ordering: .acquiring)).hasPendingHandlers
    }
}

extension TraceEntry {
    /// Whether the entry is of a writer.
    var isWriter: Bool {
        if case .writer = role { true } else { false }
    }

    /// Where a writer was made, `file:line`; `nil` for a stage.
    var place: String? {
        guard case .writer(_, let file, let line) = role else {
            return nil
        }
        return "\(file):\(line)"
    }

    /// A writer as a report names it: `Deferred<Profile> "profile 42" made at App/Profile.swift:31`.
    var writerDescription: String {
        guard case .writer(let typeName, _, _) = role else {
            return "a future"
        }
        return typeName.text + (label.map { " \"\($0)\"" } ?? "") + (place.map { " made at \($0)" } ?? "")
    }

    /// The recorded storage as a report names it, `operatorName` being its node's
    /// ``ChainNode/traceName`` (read by the caller, outside the registry's lock).
    func describe(operatorName: String) -> String {
        isWriter ? writerDescription : (stageName ?? operatorName) + (label.map { " \"\($0)\"" } ?? "")
    }
}

/// The writers of one ``PendingFutures/madeDuring(_:)-(()->Result)``, which keeps them until it
/// returns.
///
/// A task started inside it inherits it, but records nothing into it once it is closed.
private final class Scope: Sendable {
    /// The scope around this one, which records what this one records.
    let parent: Scope?

    /// The writers, each with its order, or `nil` once the scope is closed.
    private let writers = QueueLocked<[(node: any TrackedFuture, order: Int)]?>([], label: "Deferred.PendingFutures")

    init(parent: Scope?) {
        self.parent = parent
    }

    func add(_ writer: any TrackedFuture, order: Int) {
        writers.sync { $0?.append((writer, order)) }
    }

    /// The writers recorded so far that are still unfilled, oldest first, with their chains.
    func pending() -> [PendingFuture] {
        let held = writers.sync { $0 ?? [] }
        return Self.pending(held)
    }

    /// Closes the scope; returns the writers recorded in it that are still unfilled, oldest
    /// first, with their chains.
    func close() -> [PendingFuture] {
        let closed = writers.sync { writers in
            defer { writers = nil }
            return writers ?? []
        }
        // The writers are released here, outside the lock.
        return Self.pending(closed)
    }

    private static func pending(_ writers: [(node: any TrackedFuture, order: Int)]) -> [PendingFuture] {
        let unfilled = writers.filter { !$0.node.isTrackedFilled }
        guard !unfilled.isEmpty else {
            return []
        }
        let (nodes, graph) = PendingFutures.snapshot()
        let byKey = Dictionary(nodes.map { ($0.read.key, $0) }, uniquingKeysWith: { first, _ in first })
        return unfilled.sorted { $0.order < $1.order }.compactMap { writer in
            byKey[traceKey(writer.node)].flatMap { PendingFuture($0, in: graph) }
        }
    }
}

/// Whether ``PendingFutures/isTracking`` is on.
private let globalTracking = Atomic<Bool>(false)

/// How many reasons there are to record: ``PendingFutures/isTracking`` and every running
/// ``PendingFutures/madeDuring(_:)-(()->Result)``.
@usableFromInline
internal let trackingSwitch = Atomic<Int>(0)

/// How many ``PendingFutures/madeDuring(_:)-(()->Result)`` scopes run, in any thread or task.
private let openScopes = Atomic<Int>(0)

/// See ``PendingFutures/trapsOnLostWriters``.
private let trapSwitch = Atomic<Bool>(false)

/// See ``PendingFutures/lostWriterCount``.
private let lostCount = Atomic<Int>(0)

/// How many unobserved failures were printed or counted.
private let unobservedCount = Atomic<Int>(0)

/// See ``PendingFutures/longWaitThreshold``: nanoseconds, or -1 for none.
private let longWaitNanoseconds = Atomic<Int64>(-1)
