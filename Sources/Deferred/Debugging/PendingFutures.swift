import Dispatch
public import Synchronization

/// Which futures are still waiting for their value, and where they were made: the answer to
/// "why hasn't this filled?".
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
/// Only the writers a caller makes are recorded (`Deferred()` and `DeferredAttempt()`, also
/// through `Future { deferred in … }` and `Attempt { writer in … }`), not the stages that
/// combinators make from them: a stuck stage is stuck because a writer above it is. Code that
/// ``madeDuring(_:)-(()->Result)`` runs on other threads or queues is not part of the scope.
///
/// With tracking off and no scope running anywhere, making a writer costs one relaxed atomic load
/// more; while a scope runs (in any test, say), a task-local lookup too.
public enum PendingFutures {
    /// Whether every writer made from now on records where it was made, for ``all``.
    ///
    /// Off by default. Recording takes a lock and an allocation per writer; leave it off in
    /// production.
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
        let live = registry.sync { registry in
            registry.entries.values.compactMap { entry in entry.future.map { (entry, $0) } }
        }
        return live.sorted { $0.0.order < $1.0.order }.compactMap { entry, future in
            PendingFuture(future, typeName: entry.typeName, file: entry.file, line: entry.line)
        }
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
        defer { trackingSwitch.subtract(1, ordering: .relaxed) }
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
        defer { trackingSwitch.subtract(1, ordering: .relaxed) }
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

    /// Forgets `future`, a recorded writer's storage that is going away, and reports it if it
    /// was `lost`: released unfilled while handlers or derived futures were registered on it.
    internal static func released(_ future: AnyObject, lost: Bool) {
        let key = ObjectIdentifier(future)
        guard let place = registry.sync({ $0.entries.removeValue(forKey: key) }), lost, !place.isReported else {
            return
        }
        report(place, "was released unfilled while handlers or derived futures were registered on it")
    }

    /// Reports the recorded writer of `future`, an attempt that something waits for.
    ///
    /// Its `DeferredAttempt` went away while its failure type cannot say "abandoned", which
    /// orphans the attempt.
    internal static func writerLost(_ future: AnyObject) {
        let key = ObjectIdentifier(future)
        let place = registry.sync { registry -> Registry.Entry? in
            guard let entry = registry.entries[key], !entry.isReported else {
                return nil
            }
            registry.entries[key]?.isReported = true
            return entry
        }
        if let place {
            report(place, "lost its writer unfinished while handlers or derived attempts were registered on it")
        }
    }

    /// Prints or traps on a lost writer, made at `place`, that `what` happened to.
    private static func report(_ place: Registry.Entry, _ what: String) {
        guard globalTracking.load(ordering: .relaxed) else {
            return
        }
        let message = "\(place.typeName) made at \(place.file):\(place.line) \(what); they will never run."
        if trapsOnLostWriters {
            fatalError(message)
        }
        let number = lostCount.add(1, ordering: .relaxed).newValue
        if number <= 10 {
            print("Deferred: " + message + (number == 10 ? " (Further reports are only counted.)" : ""))
        }
    }

    /// Whether anything is recorded: ``isTracking``, or a ``madeDuring(_:)-(()->Result)`` running.
    @inlinable
    internal static var isRecording: Bool {
        trackingSwitch.load(ordering: .relaxed) != 0
    }

    /// Records `future`, a writer of `typeName` just made at `file`, `line`: in every open
    /// ``madeDuring(_:)-(()->Result)`` scope around this code, and in the list of ``all`` if
    /// ``isTracking`` is on.
    @usableFromInline
    internal static func record(_ future: some TrackedFuture, typeName: String, file: StaticString, line: UInt) {
        let innermost = $scope.get()
        let tracking = globalTracking.load(ordering: .relaxed)
        guard innermost != nil || tracking else {
            return
        }
        let record = Record(future, typeName: typeName, file: "\(file)", line: line)
        var scope = innermost
        while let open = scope {
            open.add(record)
            scope = open.parent
        }
        if tracking {
            registry.sync { $0.add(record) }
            future.markRecorded()
        }
    }

    /// Where `future` was made, if it was recorded.
    internal static func place(of future: AnyObject) -> String? {
        guard isRecording else {
            return nil
        }
        let key = ObjectIdentifier(future)
        var scope = $scope.get()
        while let open = scope {
            if let record = open.record(for: key) {
                return "\(record.file):\(record.line)"
            }
            scope = open.parent
        }
        return registry.sync { registry in
            registry.entries[key].map { "\($0.file):\($0.line)" }
        }
    }

    /// The scope of the innermost ``madeDuring(_:)-(()->Result)`` on this thread or task.
    @TaskLocal private static var scope: Scope?
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

    /// Creates a description of a pending future: a writer of `typeName` made at `file`,
    /// `line`, which something waits for if `isWaitedFor`.
    ///
    /// - Parameters:
    ///   - typeName: The writer's type, such as `Deferred<Int>`.
    ///   - file: The file where it was made.
    ///   - line: The line where it was made.
    ///   - isWaitedFor: Whether anything waits for it.
    public init(typeName: String, file: String, line: UInt, isWaitedFor: Bool) {
        self.typeName = typeName
        self.file = file
        self.line = line
        self.isWaitedFor = isWaitedFor
    }

    /// The report of a recorded writer made at `file`:`line`, or `nil` if it is filled: what both
    /// the global list and a scope report.
    fileprivate init?(_ future: any TrackedFuture, typeName: String, file: String, line: UInt) {
        guard !future.isTrackedFilled else {
            return nil
        }
        self.init(typeName: typeName, file: file, line: line, isWaitedFor: future.isTrackedWaitedFor)
    }

    /// Describes the future: its type, where it was made, and whether anything waits for it.
    public var description: String {
        "\(typeName) made at \(file):\(line), \(isWaitedFor ? "waited for" : "with no reader")"
    }
}

/// What ``PendingFutures`` needs to know of a recorded writer's storage.
@usableFromInline
internal protocol TrackedFuture: AnyObject, Sendable {
    /// Whether the value is there.
    var isTrackedFilled: Bool { get }

    /// Whether handlers (of readers, derived futures, waiters) wait for the value.
    var isTrackedWaitedFor: Bool { get }

    /// Makes the storage tell ``PendingFutures`` when it goes.
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

/// One recorded writer: its storage (kept strongly by a scope, weakly by the global list), and
/// where it was made.
private final class Record: Sendable {
    let strong: any TrackedFuture
    let typeName: String
    let file: String
    let line: UInt
    let order: Int

    init(_ future: any TrackedFuture, typeName: String, file: String, line: UInt) {
        strong = future
        self.typeName = typeName
        self.file = file
        self.line = line
        order = recordOrder.add(1, ordering: .relaxed).newValue
    }

    /// This record as a pending future, or `nil` if its future is filled.
    func pending() -> PendingFuture? {
        PendingFuture(strong, typeName: typeName, file: file, line: line)
    }
}

/// The records of one ``PendingFutures/madeDuring(_:)-(()->Result)``, which keeps them until it
/// returns.
///
/// A task started inside it inherits it, but records nothing into it once it is closed.
private final class Scope: Sendable {
    /// The scope around this one, which records what this one records.
    let parent: Scope?

    /// The records, or `nil` once the scope is closed.
    private let records = QueueLocked<[ObjectIdentifier: Record]?>([:], label: "Deferred.PendingFutures")

    init(parent: Scope?) {
        self.parent = parent
    }

    func add(_ record: Record) {
        records.sync { $0?[ObjectIdentifier(record.strong)] = record }
    }

    func record(for key: ObjectIdentifier) -> Record? {
        records.sync { $0?[key] }
    }

    /// Closes the scope; returns the futures recorded in it that are still unfilled, oldest first.
    func close() -> [PendingFuture] {
        let closed = records.sync { records in
            defer { records = nil }
            return records.map { Array($0.values) } ?? []
        }
        // The records are released here, outside the lock.
        return closed.sorted { $0.order < $1.order }.compactMap { $0.pending() }
    }
}

/// The global list of ``PendingFutures/all``: weak references, so that tracking keeps nothing
/// alive.
private struct Registry {
    /// A weakly held record.
    struct Entry {
        weak var future: (any TrackedFuture)?
        let typeName: String
        let file: String
        let line: UInt
        let order: Int
        /// Whether it was reported as lost already.
        var isReported = false
    }

    /// The entries, by storage: each is removed when its storage goes (see
    /// ``DeferredStorage/markRecorded()``), so a key never names a storage other than its own.
    var entries: [ObjectIdentifier: Entry] = [:]

    mutating func add(_ record: Record) {
        entries[ObjectIdentifier(record.strong)] = Entry(
            future: record.strong, typeName: record.typeName, file: record.file, line: record.line,
            order: record.order)
    }
}

/// The global list.
private let registry = QueueLocked(Registry(), label: "Deferred.PendingFutures")

/// Whether ``PendingFutures/isTracking`` is on.
private let globalTracking = Atomic<Bool>(false)

/// How many reasons there are to record: ``PendingFutures/isTracking`` and every running
/// ``PendingFutures/madeDuring(_:)-(()->Result)``.
@usableFromInline
internal let trackingSwitch = Atomic<Int>(0)

/// See ``PendingFutures/trapsOnLostWriters``.
private let trapSwitch = Atomic<Bool>(false)

/// See ``PendingFutures/lostWriterCount``.
private let lostCount = Atomic<Int>(0)

/// The order in which records were made.
private let recordOrder = Atomic<Int>(0)
