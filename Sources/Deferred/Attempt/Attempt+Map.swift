extension Attempt {
    /// Returns an attempt that succeeds with `transform` applied to this attempt's value, or
    /// fails with this attempt's error or the error `transform` throws.
    ///
    /// ```swift
    /// let names = fetchUsers().map(upon: .global()) { users in
    ///     guard !users.isEmpty else { throw APIError.empty }
    ///     return users.map(\.name)
    /// }
    /// ```
    ///
    /// `transform` runs once, on `executor`, when this attempt succeeds; it never runs if the new
    /// attempt has been cancelled (or nothing needs it any more) by then. Cancelling the new
    /// attempt cancels this one unless something else needs it; a cancellation of this one
    /// passes through.
    ///
    /// - Parameters:
    ///   - executor: Where `transform` runs. See ``Executor``.
    ///   - transform: Makes the new value, or throws a failure.
    /// - Returns: An attempt of the transformed value.
    @_disfavoredOverload  // A closure that cannot throw takes the overload below.
    @inlinable
    public func map<NewSuccess: Sendable>(
        upon executor: some Executor,
        transform: @escaping @Sendable (Success) throws(Failure) -> NewSuccess
    ) -> Attempt<NewSuccess, Failure> {
        derive(
            OnSuccessStep<Success, NewSuccess, NewSuccess, Failure>.self, upon: executor, body: transform,
            cancellation: node.cancellation)
    }

    /// Returns an attempt that succeeds with `transform` applied to this attempt's value, or
    /// fails with this attempt's error; see `map(upon:transform:)` with a closure that throws.
    ///
    /// This overload takes a transform that cannot throw, so that the failure type comes from
    /// this attempt, not from the closure: a chain after ``mapError(upon:transform:)`` type-checks
    /// as written.
    ///
    /// - Parameters:
    ///   - executor: Where `transform` runs. See ``Executor``.
    ///   - transform: Makes the new value.
    /// - Returns: An attempt of the transformed value.
    @inlinable
    public func map<NewSuccess: Sendable>(
        upon executor: some Executor,
        transform: @escaping @Sendable (Success) -> NewSuccess
    ) -> Attempt<NewSuccess, Failure> {
        let body: @Sendable (Success) throws(Failure) -> NewSuccess = transform
        return map(upon: executor, transform: body)
    }

    /// Returns an attempt that fails with `transform` applied to this attempt's error, or
    /// succeeds with this attempt's value.
    ///
    /// Use it to translate a lower layer's errors into your own:
    ///
    /// ```swift
    /// let profile = api.profile(id).mapError(upon: .immediate) { ProfileError(underlying: $0) }
    /// ```
    ///
    /// `transform` runs once, on `executor`, when this attempt fails, and never otherwise: not on
    /// a success, and not for a cancellation of the new attempt, which fails at once with its own
    /// cancellation error (`.cancelled` for a ``CancellableError``, `CancellationError` for
    /// `any Error`); a cancellation of this attempt passes through the same way.
    ///
    /// A failure type with neither has no error to fail with at the moment of a cancellation:
    /// give one with ``mapError(upon:cancellingWith:transform:)``. Without it, cancelling the new
    /// attempt withdraws its callbacks and stops the work above it, and the new attempt then
    /// fails, as cancelled, with `transform` of this attempt's cancellation error, on `executor`
    /// like any failure (if this attempt cannot fail by cancellation either, it finishes when its
    /// producer does).
    ///
    /// - Parameters:
    ///   - executor: Where `transform` runs. See ``Executor``.
    ///   - transform: Makes the new error.
    /// - Returns: An attempt with the new failure type.
    @inlinable
    public func mapError<NewFailure: Error>(
        upon executor: some Executor,
        transform: @escaping @Sendable (Failure) -> NewFailure
    ) -> Attempt<Success, NewFailure> {
        mapError(upon: executor, cancellation: nil, transform: transform)
    }

    /// Returns an attempt that fails with `transform` applied to this attempt's error, or
    /// succeeds with this attempt's value, and with `cancellationError` when it is cancelled.
    ///
    /// Use it when the new failure type has no cancellation error of its own (it is neither a
    /// ``CancellableError`` nor `any Error`):
    ///
    /// ```swift
    /// enum ProfileError: Error { case unreachable, wrapped(APIError) }
    /// let profile = api.profile(id).mapError(upon: .immediate, cancellingWith: .unreachable) {
    ///     .wrapped($0)
    /// }
    /// ```
    ///
    /// `transform` runs once, on `executor`, when this attempt fails, and never otherwise. A
    /// cancellation, of this attempt or of the new one, fails the new attempt at once with
    /// `cancellationError`, and so do the attempts derived from it that keep its failure type.
    ///
    /// - Parameters:
    ///   - executor: Where `transform` runs. See ``Executor``.
    ///   - cancellationError: The failure of the new attempt when it is cancelled.
    ///   - transform: Makes the new error.
    /// - Returns: An attempt with the new failure type.
    @inlinable
    public func mapError<NewFailure: Error>(
        upon executor: some Executor,
        cancellingWith cancellationError: NewFailure,
        transform: @escaping @Sendable (Failure) -> NewFailure
    ) -> Attempt<Success, NewFailure> {
        mapError(upon: executor, cancellation: CancellationErrorSource(cancellationError), transform: transform)
    }

    /// Derives the attempt of a `mapError` with the given cancellation error source: `nil` for
    /// the new failure type's own, if it has one.
    @inlinable
    internal func mapError<NewFailure: Error>(
        upon executor: some Executor,
        cancellation: CancellationErrorSource<NewFailure>?,
        transform: @escaping @Sendable (Failure) -> NewFailure
    ) -> Attempt<Success, NewFailure> {
        typealias Step = MapErrorStep<Success, Failure, NewFailure>
        // Converted here, where the types are concrete: generic inference in `derive` will not
        // widen a non-throwing closure to `throws(NewFailure)`.
        let body: Step.Body = transform
        return derive(Step.self, upon: executor, body: body, cancellation: cancellation)
    }

    /// Returns an attempt that succeeds with this attempt's value, or with the value
    /// `recovery` makes from its error.
    ///
    /// ```swift
    /// let settings = loadSettings().recover(upon: .immediate) { _ in .defaults }
    /// ```
    ///
    /// A cancellation is not a failure to recover from: it passes through, and `recovery` does
    /// not run.
    ///
    /// - Parameters:
    ///   - executor: Where `recovery` runs. See ``Executor``.
    ///   - recovery: Makes a value from the error, or throws a failure.
    /// - Returns: An attempt that fails only if `recovery` throws, or is cancelled.
    @_disfavoredOverload  // A closure that cannot throw takes the overload below.
    @inlinable
    public func recover(
        upon executor: some Executor,
        substituting recovery: @escaping @Sendable (Failure) throws(Failure) -> Success
    ) -> Attempt<Success, Failure> {
        derive(
            OnFailureStep<Success, Success, Failure>.self, upon: executor, body: recovery,
            cancellation: node.cancellation)
    }

    /// Returns an attempt that succeeds with this attempt's value, or with the value `recovery`
    /// makes from its error; see
    /// `recover(upon:substituting:)` with a closure that throws.
    ///
    /// This overload takes a `recovery` that cannot throw, so that the failure type comes from
    /// this attempt, not from the closure.
    ///
    /// - Parameters:
    ///   - executor: Where `recovery` runs. See ``Executor``.
    ///   - recovery: Makes a value from the error.
    /// - Returns: An attempt that fails only if it is cancelled.
    @inlinable
    public func recover(
        upon executor: some Executor,
        substituting recovery: @escaping @Sendable (Failure) -> Success
    ) -> Attempt<Success, Failure> {
        let body: @Sendable (Failure) throws(Failure) -> Success = recovery
        return recover(upon: executor, substituting: body)
    }

}

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
        cancellation: CancellationErrorSource<Step.Failure>?, follows: Bool
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
        cancellation: CancellationErrorSource<Step.Failure>?
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

/// What a derived attempt computes from its source's result, once: the step of a `map`,
/// `mapError`, `recover`, `andThen` or `fallback`.
///
/// A step is a caseless type naming what its node does: the node stores the user's closure
/// (``Body``) and calls the step's static functions, which are direct and specialized where the
/// combinator is, so a stage costs one allocation. The node decides whether the step runs; the
/// step only says what it does with an input.
///
/// The requirements ask separately whether the step runs and what passes on, so that a node's
/// common path makes no `Result` or `Optional` of its own: unoptimized, a function looks up the
/// metadata of every such local on entry, whichever branch it takes.
@usableFromInline
internal protocol AttemptStep: Sendable {
    /// The source's value.
    associatedtype Input: Sendable
    /// The source's error.
    associatedtype InputFailure: Error
    /// The derived attempt's value.
    associatedtype Success: Sendable
    /// The derived attempt's error.
    associatedtype Failure: Error
    /// What the step makes: the value itself, or an attempt that will finish with it.
    associatedtype Output
    /// What the user's closure takes: the source's value, or its error.
    associatedtype Argument
    /// What the user's closure returns.
    associatedtype Made
    /// What the user's closure throws.
    associatedtype Thrown: Error

    /// Whether the step runs for `input`; otherwise ``passedOn(_:)`` is the result.
    static func runs(for input: Result<Input, InputFailure>) -> Bool

    /// The result to pass on, without running the step, for an input it does not run for.
    static func passedOn(_ input: Result<Input, InputFailure>) -> Result<Success, Failure>

    /// The failure a cancelled source's `input` becomes here, given the derived attempt's own
    /// cancellation error.
    static func cancellation(of input: Result<Input, InputFailure>, ownError: Failure?) -> Failure?

    /// Runs `body` on an input that ``passedOn(_:)`` did not pass on.
    static func run(_ body: Body, on input: Result<Input, InputFailure>) -> Result<Output, Failure>
}

extension AttemptStep {
    /// The user's closure, as a node stores it.
    ///
    /// A function type has the same layout whatever its parameters, so a node's unspecialized
    /// deinit destroys a `Body?` without looking up any metadata (it would for a `Step?`).
    @usableFromInline
    internal typealias Body = @Sendable (Argument) throws(Thrown) -> Made
}

extension AttemptStep where InputFailure == Failure {
    /// A cancelled source's result, whatever it was, becomes this attempt's cancellation error;
    /// without one, a cancelled source's failure passes on as it is.
    @inlinable
    internal static func cancellation(of input: Result<Input, InputFailure>, ownError: Failure?) -> Failure? {
        ownError ?? input.failure
    }
}

/// The step of `map` and `andThen`: runs on a success and passes a failure on.
@usableFromInline
internal enum OnSuccessStep<Input: Sendable, Success: Sendable, Output, Failure: Error>: AttemptStep {
    @usableFromInline
    internal typealias InputFailure = Failure

    @usableFromInline
    internal typealias Argument = Input

    @usableFromInline
    internal typealias Made = Output

    @usableFromInline
    internal typealias Thrown = Failure

    @inlinable
    internal static func runs(for input: Result<Input, Failure>) -> Bool {
        if case .success = input { true } else { false }
    }

    @inlinable
    internal static func passedOn(_ input: Result<Input, Failure>) -> Result<Success, Failure> {
        .failure(input.failureUnchecked)
    }

    @inlinable
    internal static func run(_ body: Body, on input: Result<Input, Failure>) -> Result<Output, Failure> {
        Result { () throws(Failure) in try body(input.successValueUnchecked) }
    }
}

/// The step of `recover` and `fallback`: runs on a failure and passes a success on.
@usableFromInline
internal enum OnFailureStep<Success: Sendable, Output, Failure: Error>: AttemptStep {
    @usableFromInline
    internal typealias Input = Success

    @usableFromInline
    internal typealias InputFailure = Failure

    @usableFromInline
    internal typealias Argument = Failure

    @usableFromInline
    internal typealias Made = Output

    @usableFromInline
    internal typealias Thrown = Failure

    @inlinable
    internal static func runs(for input: Result<Success, Failure>) -> Bool {
        if case .failure = input { true } else { false }
    }

    @inlinable
    internal static func passedOn(_ input: Result<Success, Failure>) -> Result<Success, Failure> {
        input
    }

    @inlinable
    internal static func run(_ body: Body, on input: Result<Success, Failure>) -> Result<Output, Failure> {
        Result { () throws(Failure) in try body(input.failureUnchecked) }
    }
}

/// The step of `mapError`: makes a new error from a failure that is not a cancellation.
@usableFromInline
internal enum MapErrorStep<Success: Sendable, InputFailure: Error, Failure: Error>: AttemptStep {
    @usableFromInline
    internal typealias Input = Success

    @usableFromInline
    internal typealias Output = Success

    @usableFromInline
    internal typealias Argument = InputFailure

    @usableFromInline
    internal typealias Made = Failure

    /// Typed as throwing only to share ``AttemptStep/Body``'s shape (the transform never
    /// throws): Swift 6.3 crashes emitting a `throws(Never)` witness for it.
    @usableFromInline
    internal typealias Thrown = Failure

    @inlinable
    internal static func runs(for input: Result<Success, InputFailure>) -> Bool {
        if case .failure = input { true } else { false }
    }

    @inlinable
    internal static func passedOn(_ input: Result<Success, InputFailure>) -> Result<Success, Failure> {
        .success(input.successValueUnchecked)
    }

    /// A cancellation becomes this attempt's own cancellation error: the source's error has
    /// another type.
    @inlinable
    internal static func cancellation(of input: Result<Success, InputFailure>, ownError: Failure?) -> Failure? {
        ownError
    }

    @inlinable
    internal static func run(_ body: Body, on input: Result<Success, InputFailure>) -> Result<Success, Failure> {
        do throws(Failure) {
            return .failure(try body(input.failureUnchecked))
        } catch {
            return .failure(error)
        }
    }
}
