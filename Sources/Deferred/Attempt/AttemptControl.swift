import Synchronization

/// The shared state of one pending ``Attempt``: its result, whether it finished by being
/// cancelled, and how many dependents still need it.
///
/// One compare-and-swap on `finish` decides between completion and cancellation, so exactly
/// one of them happens; the result is filled after that decision and the producer's cancel
/// handlers run after a cancellation, exactly once. Every handler is released when the attempt
/// finishes.
///
/// *Demand* counts the dependents that need the result and can give up on it: attempts derived
/// with `map`, `andThen`, `allSucceeded` and the like, tasks awaiting `get()`, and handlers
/// added with `upon` (which never give up). When the last dependent that can give up does, and
/// no other demand is left, the attempt is cancelled: work that nobody needs any more stops.
@usableFromInline
internal final class AttemptControl<Success: Sendable, Failure: CancellableError>: Sendable {
    /// The result, filled once the attempt finishes.
    @usableFromInline
    internal let result = Deferred<Result<Success, Failure>>()

    /// Filled when the attempt finishes: `true` if it was cancelled.
    private let outcome = Deferred<Bool>()

    /// How the attempt finished: 0 while it runs, then ``completed`` or ``cancelledState``.
    private let finish = Atomic<Int>(0)

    /// How many dependents need the result.
    private let demand = Atomic<Int>(0)

    private static var completed: Int { 1 }
    private static var cancelledState: Int { 2 }

    @usableFromInline
    internal init() {}

    /// Whether the attempt has finished, by completing or by being cancelled.
    @usableFromInline
    internal var isFinished: Bool {
        finish.load(ordering: .acquiring) != 0
    }

    /// Whether the attempt was cancelled.
    @usableFromInline
    internal var isCancelled: Bool {
        finish.load(ordering: .acquiring) == AttemptControl.cancelledState
    }

    /// Finishes the attempt with `result` unless it has finished; returns whether this call
    /// finished it.
    @usableFromInline
    @discardableResult
    internal func complete(with result: Result<Success, Failure>) -> Bool {
        guard claim(AttemptControl.completed) else {
            return false
        }
        self.result.fill(with: result)
        outcome.fill(with: false)
        return true
    }

    /// Cancels the attempt unless it has finished: it fails with `Failure.cancelled`, and the
    /// producer's cancel handlers run.
    @usableFromInline
    internal func cancel() {
        guard claim(AttemptControl.cancelledState) else {
            return
        }
        result.fill(with: .failure(.cancelled))
        outcome.fill(with: true)
    }

    /// Runs `handler` once if the attempt is cancelled, at once if it was; drops it if the
    /// attempt completes instead.
    @usableFromInline
    internal func onCancel(_ handler: @escaping @Sendable () -> Void) {
        outcome.upon(ImmediateExecutor.shared) { wasCancelled in
            if wasCancelled {
                handler()
            }
        }
    }

    /// Runs `handler` once when the attempt finishes, either way.
    @usableFromInline
    internal func onFinish(_ handler: @escaping @Sendable () -> Void) {
        outcome.upon(ImmediateExecutor.shared) { _ in handler() }
    }

    /// Records demand that is never withdrawn (a handler added with `upon`).
    @usableFromInline
    internal func addPermanentDemand() {
        demand.add(1, ordering: .relaxed)
    }

    /// Records the demand of a dependent until `dependent` finishes; when it does and nobody
    /// else needs this attempt, this attempt is cancelled.
    ///
    /// The dependent holds this attempt weakly: if it is gone, nobody can need it.
    @usableFromInline
    internal func addDemand<S, F>(until dependent: AttemptControl<S, F>) {
        demand.add(1, ordering: .relaxed)
        dependent.onFinish { [weak self] in
            self?.dropDemand()
        }
    }

    /// Records demand that the caller withdraws with ``dropDemand()``.
    @usableFromInline
    internal func addDemand() {
        demand.add(1, ordering: .relaxed)
    }

    /// Withdraws one dependent's demand; cancels the attempt if none is left.
    @usableFromInline
    internal func dropDemand() {
        if demand.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
            cancel()
        }
    }

    private func claim(_ state: Int) -> Bool {
        finish.compareExchange(expected: 0, desired: state, ordering: .acquiringAndReleasing).exchanged
    }
}
