/// One run of the work per key, shared by every caller that asks for the key while it runs; each
/// caller gets an attempt of its own, which it can cancel without affecting the others.
///
/// A service keeps a `SharedAttempts` privately and asks it instead of starting the work itself:
///
/// ```swift
/// final class AvatarService: Sendable {
///     private let downloads = SharedAttempts<URL, Image, any Error>()
///
///     func avatar(at url: URL) -> Attempt<Image, any Error> {
///         downloads.attempt(for: url) { url in self.download(url) }
///     }
/// }
/// ```
///
/// Ten table cells that ask for the same avatar at once share one download:
/// - The first caller's `start` starts the run; the callers that ask while it runs join it, and
///   `start` does not run for them.
/// - A caller that cancels its attempt (or whose task stops awaiting `get()`) stops getting
///   anything; the others still get the result.
/// - When every caller has given up, the run is cancelled: the cancellation reaches the work as
///   if one caller had cancelled the work's own attempt. A caller that asks after that starts a
///   new run, never joining the cancelled one.
/// - When the run finishes, the key is forgotten, so the next caller starts a new run; or, made
///   with ``init(keepingSuccessesFor:failuresFor:upon:)``, its success (and its failure, if asked)
///   is kept for a while and handed to the callers that ask meanwhile.
///
/// Every method may be called from any thread. The table takes a lock for a dictionary lookup
/// (the key's hashing and equality run under it) and never runs `start` or any callback while it
/// holds it, so `start` may ask this table for other keys. A caller's attempt waits for the run
/// through the library's link layer, so sharing adds no thread hop, and chains of runs of any
/// depth finish and cancel in constant stack space.
///
/// The table holds a run until it ends. A run whose writer was lost without an answer (a failure
/// type that cannot say "abandoned", see ``AbandonableError``) is orphaned, with its callers'
/// attempts, and leaves the table. `start` must not wait,
/// directly or through other keys, for the run of its own key: that run would wait for itself,
/// and its callers' cancellations could not reach the work.
///
/// For work that cannot fail or be called off, use ``SharedFutures``.
public final class SharedAttempts<Key: Hashable & Sendable, Success: Sendable, Failure: Error>: Sendable {
    @usableFromInline
    internal typealias Table = SharedTable<Key, AttemptNode<Success, Failure>, Result<Success, Failure>>

    @usableFromInline
    internal let table: Table

    /// Creates a table that forgets each key as soon as its run finishes.
    public init() {
        table = Table(retention: nil)
    }

    /// Creates a table that keeps a run's success for `successDuration`, and its failure for
    /// `failureDuration`, counted on `executor`; a cancellation is never kept, nor a failure that
    /// reads as one (a `CancellationError`, or the failure type's `cancelled` if it is
    /// `Equatable`).
    ///
    /// ```swift
    /// let profiles = SharedAttempts<User.ID, Profile, any Error>(
    ///     keepingSuccessesFor: .seconds(30), upon: DispatchQueue.global())
    /// ```
    ///
    /// A caller that asks for the key meanwhile gets an attempt that has finished with that
    /// result, and `start` does not run. Tests can count the time on a virtual clock
    /// (`VirtualTimeExecutor` in the `DeferredExecutors` module).
    ///
    /// - Parameters:
    ///   - successDuration: How long a success is kept; zero or less keeps none.
    ///   - failureDuration: How long a failure is kept; by default none is.
    ///   - executor: Where the time is counted.
    public init(
        keepingSuccessesFor successDuration: Duration,
        failuresFor failureDuration: Duration = .zero,
        upon executor: some SchedulingExecutor
    ) {
        table = Table(
            retention: .init(executor: executor) { result in
                let duration: Duration
                switch result {
                case .success:
                    duration = successDuration
                case .failure(let error):
                    // A work that fails with a cancellation of its own is not a result to hand out.
                    guard !CancellationErrorBox<Failure>.isCancellation(error) else {
                        return nil
                    }
                    duration = failureDuration
                }
                return duration > .zero ? duration : nil
            })
    }

    /// Returns an attempt of the run for `key`: the one in flight, a kept result, or a new run
    /// that `start` starts now.
    ///
    /// `start` runs on the calling thread before this returns, only if no run for `key` is in
    /// flight (or kept); it is given the key, so that it need not capture it. Cancelling the
    /// returned attempt gives up this caller's interest only; the run is cancelled once every
    /// caller that joined it has given up.
    ///
    /// - Parameters:
    ///   - key: What identifies the work.
    ///   - start: Starts the work for `key`.
    /// - Returns: This caller's attempt of the run's result.
    @inlinable
    public func attempt(
        for key: Key,
        start: (Key) -> Attempt<Success, Failure>
    ) -> Attempt<Success, Failure> {
        let found = table.find(
            key,
            join: { run in run.takeUnit() ? DemandUnit(run) : nil },
            makeRun: { [table] generation in
                let run = SharedRunAttemptNode<Success, Failure> { [weak table] run, stopped in
                    table?.ended(key, generation: generation, keeping: stopped ? nil : run.peek())
                }
                // The run is new: its first unit is never refused.
                _ = run.takeUnit()
                return (run, DemandUnit(run))
            })
        switch found {
        case .kept(let result):
            return Attempt(node: AttemptNode(finished: result, cancellation: nil))
        case .joined(let run, let unit):
            return Attempt(node: run.caller(holding: unit))
        case .started(let run, let unit, _):
            let caller = run.caller(holding: unit)
            var queue = DrainQueue()
            // A work that has finished already (or finishes as it is linked) decides the run
            // here: its callers are parked until the run has reported its end to the table, so
            // that none sees the result while the key still leads to the run.
            queue.parkingCompletions { queue in
                if run.mayStartStep {
                    run.follow(start(key).node, in: &queue)
                }
            }
            // The first caller was linked before the run followed its work: if the work is
            // recorded, so is the run now, and the caller with it.
            if run.isTraced {
                run.traceCaller(caller)
            }
            return Attempt(node: caller)
        }
    }

    /// How many keys have a run in flight or a kept result.
    public var count: Int { table.count }

    /// Whether `key` has a run in flight or a kept result.
    ///
    /// - Parameter key: The key to look for.
    /// - Returns: `true` if a caller asking for `key` now would not start a new run.
    public func contains(_ key: Key) -> Bool { table.contains(key) }

    /// Forgets `key`, so that the next caller starts a new run: drops a kept result, or lets the
    /// run in flight go on for the callers that joined it, without new ones.
    ///
    /// - Parameter key: The key to forget.
    public func forget(_ key: Key) { table.forget(key) }
}

extension AttemptNode {
    /// Records `caller`, a caller of this recorded run, for ``PendingFutures``.
    @usableFromInline
    internal final func traceCaller(_ caller: ChainNode) {
        PendingFutures.linked(caller, to: self)
    }

    /// Makes a caller's attempt of this run, holding `unit` of the run's demand until it is
    /// decided or cancelled.
    @inlinable
    internal final func caller(holding unit: DemandUnit) -> AttemptNode {
        let caller = AttemptNode(holding: unit.node, cancellation: nil)
        addConsumer(.sourcedLink(caller, AttemptNode.forward))
        return caller
    }
}

/// The node of a shared run: an attempt that follows the work and tells its table when it
/// ends, cancelled (every caller gave up, or its work was cancelled) or finished, with its
/// result.
///
/// The report comes as the run's demand ends: as soon as every caller has given up, before the
/// work has acknowledged the cancellation.
@usableFromInline
internal final class SharedRunAttemptNode<Success: Sendable, Failure: Error>: AttemptNode<Success, Failure>,
    @unchecked Sendable
{
    override internal var traceName: String {
        "shared run"
    }

    override internal var traceDependentName: String? {
        "caller"
    }

    /// Tells the table that `run` ended, stopped or not; called once.
    @usableFromInline
    internal let report: @Sendable (_ run: AttemptNode<Success, Failure>, _ stopped: Bool) -> Void

    @usableFromInline
    internal init(report: @escaping @Sendable (_ run: AttemptNode<Success, Failure>, _ stopped: Bool) -> Void) {
        self.report = report
        super.init(cancellation: nil)
    }

    @usableFromInline
    override internal func demandEnded(_ end: DemandEnd) {
        if end == .stop, isTraced {
            PendingFutures.gaveUp(self, .sharedRunWithoutCallers)
        }
        report(self, end == .stop)
    }
}
