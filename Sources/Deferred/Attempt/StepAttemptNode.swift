/// A stage whose step runs once, on its source's result: the node behind `map`, `mapError` and
/// `recover`, which decide with what the step makes, and `andThen` and `fallback`, which follow
/// the attempt the step starts.
///
/// When the source's result arrives, the node either passes it on at once (a failure past a
/// `map`, a success past a `recover`, and every cancellation) or runs its step on its executor,
/// unless it has been decided (cancelled, or nobody needs it) by the time the step would start.
/// What becomes of the step's output is the link step's choice (``receive(_:_:_:_:)`` or
/// ``receiveFollowing(_:_:_:_:)``), passed along as a function, so one node serves both.
///
/// The step is taken by the single run of the source's handler, or by the one body that
/// handler submits, so it has one owner at a time.
///
/// `Place` says where the step runs: ``InPlace`` stores nothing, so that a `map` on the
/// immediate executor of a small value fits the allocator's fast bins (120 bytes).
@usableFromInline
internal final class StepAttemptNode<Step: AttemptStep, Place: StepPlace>: AttemptNode<Step.Success, Step.Failure>,
    @unchecked Sendable
{
    override internal var traceName: String {
        Step.traceName
    }

    /// What a node does with its step's output: decides with it, or follows the attempt it is.
    @usableFromInline
    internal typealias Finish =
        @Sendable (StepAttemptNode, Result<Step.Output, Step.Failure>, Bool, inout DrainQueue) -> Void

    /// Where the step runs; its executor is taken by the single run of the source's handler
    /// that submits the step, so that an executor that only the pending step keeps (a manual
    /// executor dropped with the step queued) is not kept by a cycle through this node.
    @exclusivity(unchecked)
    @usableFromInline
    internal var place: Place

    /// The user's closure, until it runs or is dropped.
    @exclusivity(unchecked)
    @usableFromInline
    internal var body: Step.Body?

    /// Makes the node of a step on `source`.
    ///
    /// A step that decides holds its source alone; one that follows the attempt it starts
    /// trades its source for that attempt.
    @inlinable
    internal init(
        on source: Attempt<Step.Input, Step.InputFailure>, place: Place, body: @escaping Step.Body,
        cancellation: CancellationErrorBox<Step.Failure>?, follows: Bool
    ) {
        self.place = place
        self.body = body
        if follows {
            super.init(holding: source.node.heldByConsumer(), cancellation: cancellation)
        } else {
            super.init(holdingAlone: source.node, held: source.node.takeUnitIfPending(), cancellation: cancellation)
        }
    }

    /// The link step of a node that follows the source's result through its step, with what
    /// `finish` does with the step's output.
    @inlinable
    internal static func receive(
        _ source: ChainNode, _ node: ChainNode, _ input: Result<Step.Input, Step.InputFailure>,
        _ queue: inout DrainQueue, finish: @escaping Finish
    ) {
        let source = AttemptNode<Step.Input, Step.InputFailure>.source(source)
        if source.isCancelledFlag {
            StepAttemptNode.linked(node).receiveFromCancelledSource(input, of: source, in: &queue, finish: finish)
        } else {
            StepAttemptNode.linked(node).receive(input, in: &queue, finish: finish)
        }
    }

    /// Takes the result of a source that was not cancelled: passes it on or runs the step.
    @inlinable
    internal func receive(
        _ input: Result<Step.Input, Step.InputFailure>, in queue: inout DrainQueue, finish: @escaping Finish
    ) {
        if !Step.runs(for: input) {
            body = nil  // The step does not run for this input, which passes on as it is.
            decide(Step.passedOn(input), cancelled: false, in: &queue)
        } else {
            run(on: input, cancelled: false, in: &queue, finish: finish)
        }
    }

    /// Runs the step on `input`, where ``place`` says, and hands its output to `finish`, as
    /// cancelled if `cancelled`.
    @inlinable
    internal func run(
        on input: Result<Step.Input, Step.InputFailure>, cancelled: Bool, in queue: inout DrainQueue,
        finish: @escaping Finish
    ) {
        // A place that runs in place stores nothing and is never written: a write to an empty
        // field would be one at the address of whatever follows it.
        if !Place.runsInPlace, let executor = place.takeExecutor() {
            let guarded = DroppableCallback(self)
            executor.submit {
                guarded.run { node in
                    var queue = DrainQueue()
                    node.start(input, cancelled: cancelled, in: &queue, finish: finish)
                    queue.drain()
                }
            }
        } else {
            start(input, cancelled: cancelled, in: &queue, finish: finish)
        }
    }

    /// Decides this attempt as cancelled, since its source was.
    ///
    /// A failure type without a cancellation error (a `mapError` into a plain type) has no error
    /// to decide with at once: the step makes one from the source's failure (its cancellation
    /// error, also for a source cancelled after it succeeded), where it runs, and the result
    /// still counts as a cancellation. Without any error to go on, the input passes through the
    /// step as usual.
    @usableFromInline
    internal func receiveFromCancelledSource(
        _ input: Result<Step.Input, Step.InputFailure>, of source: AttemptNode<Step.Input, Step.InputFailure>,
        in queue: inout DrainQueue, finish: @escaping Finish
    ) {
        if let failure = Step.cancellation(of: input, ownError: cancellationError) {
            body = nil
            decide(.failure(failure), cancelled: true, in: &queue)
        } else if let error = input.failure ?? source.cancellationError, Step.runs(for: .failure(error)) {
            run(on: .failure(error), cancelled: true, in: &queue, finish: finish)
        } else {
            receive(input, in: &queue, finish: finish)
        }
    }

    @usableFromInline
    override internal func dropUnrunStep() {
        body = nil
    }

    /// Runs the step unless this attempt was decided (cancelled, say).
    @inlinable
    internal func start(
        _ input: Result<Step.Input, Step.InputFailure>, cancelled: Bool, in queue: inout DrainQueue,
        finish: Finish
    ) {
        if mayStartStep, let body = body.take() {
            if Step.Output.self != Step.Success.self && isTracked {
                // A step that starts an attempt (`andThen`, `fallback`) runs under its consumers'
                // deadline, which `Deadline.current` reads, and which the attempt it starts
                // learns as this stage follows it.
                let output = Deadline.run(under: DeadlineLedger.shared.deadline(of: self)) {
                    Step.run(body, on: input)
                }
                finish(self, output, cancelled, &queue)
                return
            }
            finish(self, Step.run(body, on: input), cancelled, &queue)
        } else {
            body = nil  // Decided: release the closure now.
        }
    }
}

extension StepAttemptNode where Step.Output == Step.Success {
    /// The link step of a node that decides with its step's output.
    @inlinable
    internal static func receive(
        _ source: ChainNode, _ node: ChainNode, _ input: Result<Step.Input, Step.InputFailure>,
        _ queue: inout DrainQueue
    ) {
        receive(source, node, input, &queue) { node, output, cancelled, queue in
            node.decide(output, cancelled: cancelled, in: &queue)
        }
    }
}

extension StepAttemptNode where Step.Output == Attempt<Step.Success, Step.Failure> {
    /// The link step of a node that follows the attempt its step starts.
    @inlinable
    internal static func receiveFollowing(
        _ source: ChainNode, _ node: ChainNode, _ input: Result<Step.Input, Step.InputFailure>,
        _ queue: inout DrainQueue
    ) {
        receive(source, node, input, &queue) { node, output, cancelled, queue in
            switch output {
            case .success(let attempt): node.follow(attempt.node, in: &queue)
            case .failure(let error): node.decide(.failure(error), cancelled: cancelled, in: &queue)
            }
        }
    }
}

/// Where a ``StepAttemptNode`` runs its step.
@usableFromInline
internal protocol StepPlace: Sendable {
    /// Whether every step placed so runs at once, with no executor to take.
    static var runsInPlace: Bool { get }

    /// Takes the executor to submit the step to, or `nil` to run it at once.
    mutating func takeExecutor() -> (any Executor)?
}

/// Runs a step at once, where its source's result arrives; stores nothing.
@frozen
@usableFromInline
internal struct InPlace: StepPlace {
    @inlinable
    internal init() {}

    @inlinable
    internal static var runsInPlace: Bool { true }

    @inlinable
    internal mutating func takeExecutor() -> (any Executor)? { nil }
}

/// Submits a step to an executor.
@frozen
@usableFromInline
internal struct OnExecutor: StepPlace {
    @usableFromInline
    internal var target: (any Executor)?

    @inlinable
    internal init(_ target: any Executor) {
        self.target = target
    }

    @inlinable
    internal static var runsInPlace: Bool { false }

    @inlinable
    internal mutating func takeExecutor() -> (any Executor)? { target.take() }
}

extension Attempt {
    /// Derives an attempt whose `Step` runs `body` on `executor`.
    @inlinable
    internal func derive<Step: AttemptStep>(
        _: Step.Type,
        upon executor: some Executor,
        body: @escaping Step.Body,
        cancellation: CancellationErrorBox<Step.Failure>?
    ) -> Attempt<Step.Success, Step.Failure>
    where Step.Input == Success, Step.InputFailure == Failure, Step.Output == Step.Success {
        guard executor.runsInPlace else {
            typealias Node = StepAttemptNode<Step, OnExecutor>
            let node = Node(
                on: self, place: OnExecutor(executor), body: body, cancellation: cancellation, follows: false)
            return attach(node, Node.receive)
        }
        typealias Node = StepAttemptNode<Step, InPlace>
        return attach(
            Node(on: self, place: InPlace(), body: body, cancellation: cancellation, follows: false), Node.receive)
    }
}
