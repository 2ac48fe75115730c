/// A transparent attempt whose result its step computes from its source's result, once: the
/// node behind `map`, `mapError` and `recover`.
///
/// When the source's result arrives, the node either passes it on at once (a failure past a
/// `map`, a success past a `recover`, and every cancellation) or runs its step on its executor,
/// unless it has been decided (cancelled) or nobody needs it by the time the step would start.
///
/// The step is taken by the single run of the source's handler, or by the one body that
/// handler submits, so it has one owner at a time.
///
/// `Place` says where the step runs: ``InPlace`` stores nothing, so that a `map` on the
/// immediate executor of a small value fits the allocator's fast bins (120 bytes).
@usableFromInline
internal final class StepAttemptNode<Step: AttemptStep, Place: StepPlace>: AttemptNode<Step.Success, Step.Failure>,
    @unchecked Sendable
where Step.Output == Step.Success {
    /// Where the step runs.
    @usableFromInline
    internal let place: Place

    /// The user's closure, until it runs or is dropped.
    @exclusivity(unchecked)
    @usableFromInline
    internal var body: Step.Body?

    @inlinable
    internal init(
        on source: Attempt<Step.Input, Step.InputFailure>,
        place: Place,
        body: @escaping Step.Body,
        cancellation: CancellationErrorSource<Step.Failure>?
    ) {
        self.place = place
        self.body = body
        super.init(derived: source.shareDemand(), cancellation: cancellation)
    }

    /// The link step that the source's handler runs.
    @inlinable
    internal static func receive(
        _ source: ChainNode, _ node: ChainNode, _ input: Result<Step.Input, Step.InputFailure>,
        _ queue: inout DrainQueue
    ) {
        StepAttemptNode.linked(node).receive(
            input, sourceCancelled: AttemptNode<Step.Input, Step.InputFailure>.source(source).isCancelledFlag,
            in: &queue)
    }

    @inlinable
    internal func receive(
        _ input: Result<Step.Input, Step.InputFailure>, sourceCancelled: Bool, in queue: inout DrainQueue
    ) {
        if sourceCancelled {
            receiveFromCancelledSource(input, in: &queue)
        } else if !Step.runs(for: input) {
            body = nil  // The step does not run for this input, which passes on as it is.
            decide(Step.passedOn(input), cancelled: false, in: &queue)
        } else if let executor = place.executor {
            executor.submit { [self] in
                var queue = DrainQueue()
                start(input, in: &queue)
                queue.drain()
            }
        } else {
            start(input, in: &queue)
        }
    }

    /// Decides this attempt as cancelled, since its source was; or, if its failure type has
    /// no cancellation error, takes `input` as usual.
    @usableFromInline
    internal func receiveFromCancelledSource(_ input: Result<Step.Input, Step.InputFailure>, in queue: inout DrainQueue)
    {
        if let failure = Step.cancellation(of: input, ownError: cancellationError) {
            body = nil
            decide(.failure(failure), cancelled: true, in: &queue)
        } else {
            receive(input, sourceCancelled: false, in: &queue)
        }
    }

    /// Runs the step unless this attempt was decided or is no longer needed.
    @inlinable
    internal func start(_ input: Result<Step.Input, Step.InputFailure>, in queue: inout DrainQueue) {
        if mayStartStep(in: &queue), let body = body.take() {
            decide(Step.run(body, on: input), cancelled: false, in: &queue)
        } else {
            body = nil  // Decided or unneeded: release the closure now.
        }
    }
}

/// Where a ``StepAttemptNode`` runs its step.
@usableFromInline
internal protocol StepPlace: Sendable {
    /// The executor to submit the step to, or `nil` to run it at once.
    var executor: (any Executor)? { get }
}

/// Runs a step at once, where its source's result arrives; stores nothing.
@frozen
@usableFromInline
internal struct InPlace: StepPlace {
    @inlinable
    internal init() {}

    @inlinable
    internal var executor: (any Executor)? { nil }
}

/// Submits a step to an executor.
@frozen
@usableFromInline
internal struct OnExecutor: StepPlace {
    @usableFromInline
    internal let target: any Executor

    @inlinable
    internal init(_ target: any Executor) {
        self.target = target
    }

    @inlinable
    internal var executor: (any Executor)? { target }
}

extension Attempt {
    /// Derives an attempt whose `Step` runs `body` on `executor`.
    @inlinable
    internal func derive<Step: AttemptStep>(
        _: Step.Type,
        upon executor: some Executor,
        body: @escaping Step.Body,
        cancellation: CancellationErrorSource<Step.Failure>?
    ) -> Attempt<Step.Success, Step.Failure>
    where Step.Input == Success, Step.InputFailure == Failure, Step.Output == Step.Success {
        guard executor.runsInPlace else {
            typealias Node = StepAttemptNode<Step, OnExecutor>
            return attach(
                Node(on: self, place: OnExecutor(executor), body: body, cancellation: cancellation), Node.receive)
        }
        typealias Node = StepAttemptNode<Step, InPlace>
        return attach(Node(on: self, place: InPlace(), body: body, cancellation: cancellation), Node.receive)
    }

    /// The demand for a transparent attempt derived from this one.
    ///
    /// The new attempt is the next stage on this attempt's path, with the path unit (handed
    /// over or new); or, if another stage continues the path already, it starts a hub of its
    /// own holding a unit here. If nobody needed this attempt any more, it is decided as
    /// cancelled and the new attempt holds nothing.
    @inlinable
    internal func shareDemand() -> DerivedDemand {
        guard !node.isDecided else {
            // This attempt has its result: the new one needs nothing upstream, and taking a
            // unit here would make the stages above it needed again.
            return DerivedDemand(hub: nil, flags: AttemptFlags.ownsHub)
        }
        let hub = node.consumerHub()
        let (depth, continuesPath) = node.takeUnit(on: hub, continuingPath: true)
        if depth == nil {
            node.settleIfAbandoned()
            if node.isDecided {
                // Decided meanwhile (a timeout that fired, say), releasing what it held.
                return DerivedDemand(hub: nil, flags: AttemptFlags.ownsHub)
            }
        }
        guard continuesPath else {
            return node.branch(holding: depth, on: hub)
        }
        return DerivedDemand(
            hub: hub, flags: (depth == nil ? 0 : AttemptFlags.holdsUnit) | AttemptFlags.depth(node.depth + 1))
    }

    /// Links `derived` to this attempt with `step`, running it at once if this attempt has
    /// finished, and returns it as an attempt.
    @inlinable
    internal func attach<NewSuccess, NewFailure>(
        _ derived: AttemptNode<NewSuccess, NewFailure>,
        _ step: @escaping @Sendable (ChainNode, ChainNode, Result<Success, Failure>, inout DrainQueue) -> Void
    ) -> Attempt<NewSuccess, NewFailure> {
        var queue = DrainQueue()
        node.link(derived, in: &queue, step)
        queue.drain()
        return Attempt<NewSuccess, NewFailure>(node: derived)
    }
}
