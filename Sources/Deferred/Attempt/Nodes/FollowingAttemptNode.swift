/// An attempt that waits for its source, then for another attempt that a step starts from the
/// source's result: the node behind `andThen` and `fallback`.
///
/// It owns its hub. While it waits for the source, the hub holds a unit of the source's demand;
/// once the step has started the next attempt, the hub holds a unit of the next attempt's
/// demand instead. Cancelling it, or giving up every unit on its hub, releases whichever unit it
/// holds, which cancels that attempt unless something else needs it.
@usableFromInline
internal final class FollowingAttemptNode<Step: AttemptStep>: AttemptNode<Step.Success, Step.Failure>,
    @unchecked Sendable
where Step.InputFailure == Step.Failure, Step.Output == Attempt<Step.Success, Step.Failure> {
    /// Where the step runs; `nil` stands for the immediate executor.
    @usableFromInline
    internal let executor: (any Executor)?

    /// The user's closure, until it runs or is dropped; taken by one owner at a time, as in
    /// ``StepAttemptNode``.
    @exclusivity(unchecked)
    @usableFromInline
    internal var body: Step.Body?

    @inlinable
    internal init(on source: Attempt<Step.Input, Step.Failure>, executor: (any Executor)?, body: @escaping Step.Body) {
        self.executor = executor
        self.body = body
        super.init(owningHubWith: source.node.cancellation)
        hold(source.node)
    }

    /// The link step that the source's handler runs.
    @inlinable
    internal static func receive(
        _ source: ChainNode, _ node: ChainNode, _ input: Result<Step.Input, Step.Failure>, _ queue: inout DrainQueue
    ) {
        let node = FollowingAttemptNode.linked(node)
        if AttemptNode<Step.Input, Step.Failure>.source(source).isCancelledFlag,
            node.decideCancelled(from: input, in: &queue)
        {
            return
        } else if !Step.runs(for: input) {
            node.passOn(input, in: &queue)
        } else if let executor = node.executor {
            executor.submit {
                var queue = DrainQueue()
                node.start(input, in: &queue)
                queue.drain()
            }
        } else {
            node.start(input, in: &queue)
        }
    }

    /// Decides this attempt as cancelled, since its source was with `input`; returns `false`,
    /// deciding nothing, if its failure type has no cancellation error.
    @usableFromInline
    internal func decideCancelled(from input: Result<Step.Input, Step.Failure>, in queue: inout DrainQueue) -> Bool {
        guard let error = Step.cancellation(of: input, ownError: cancellationError) else {
            return false
        }
        body = nil
        decide(.failure(error), cancelled: true, in: &queue)
        return true
    }

    /// Decides this attempt with what `input` passes on, without running the step.
    @inlinable
    internal func passOn(_ input: Result<Step.Input, Step.Failure>, in queue: inout DrainQueue) {
        body = nil
        decide(Step.passedOn(input), cancelled: false, in: &queue)
    }

    /// Runs the step unless this attempt was decided or is no longer needed, then follows the
    /// attempt it started.
    @inlinable
    internal func start(_ input: Result<Step.Input, Step.Failure>, in queue: inout DrainQueue) {
        guard mayStartStep(in: &queue), let body = body.take() else {
            body = nil
            return
        }
        switch Step.run(body, on: input) {
        case .success(let attempt):
            follow(attempt.node, in: &queue)
        case .failure(let error):
            decide(.failure(error), cancelled: false, in: &queue)
        }
    }
}

extension AttemptNode {
    /// Makes this owner's hub hold a unit of `source`'s demand, in place of whatever it held;
    /// returns `false`, holding nothing, if this attempt no longer waits for anything.
    @inlinable
    @discardableResult
    internal final func hold<SourceSuccess, SourceFailure>(_ source: AttemptNode<SourceSuccess, SourceFailure>) -> Bool
    {
        let unit = source.takeUnit(forOwner: true)
        let (held, previous) = consumerHub().holdUpstream(unit)
        previous.release()
        guard held else {
            unit?.release()
            return false
        }
        if unit == nil {
            source.settleIfAbandoned()
        }
        return true
    }

    /// Finishes this attempt with `next`'s result once it has one, holding `next`'s demand
    /// until then; decides it as cancelled instead if nobody needs it any more.
    ///
    /// A `next` that has finished passes its result on at once.
    @inlinable
    internal final func follow(_ next: AttemptNode, in queue: inout DrainQueue) {
        if next.isFilled {
            // Finished already (`Attempt(success:)`, say): there is no demand to hold on it, and
            // the units this attempt holds upstream are released when it is decided.
            decide(passing: next.filledValue, sourceCancelled: next.isCancelledFlag, in: &queue)
            return
        }
        guard hold(next) else {
            _ = decideCancelled(in: &queue)
            return
        }
        next.link(self, in: &queue, AttemptNode.forward)
    }

    /// The link step that finishes the attempt `node` with the result of the attempt `source`,
    /// a cancellation passing through as a cancellation.
    @inlinable
    internal static func forward(
        _ source: ChainNode, _ node: ChainNode, _ result: Result<Success, Failure>, _ queue: inout DrainQueue
    ) {
        AttemptNode.linked(node).decide(
            passing: result, sourceCancelled: AttemptNode.source(source).isCancelledFlag, in: &queue)
    }

    /// Decides this attempt with what a source that finished with `result` passes on; see
    /// ``passedOn(_:sourceCancelled:)``.
    ///
    /// A source that was not cancelled passes its result on as it is, without making a `Result`
    /// of its own (unoptimized, the metadata of such a local is looked up on every call).
    @inlinable
    internal final func decide(
        passing result: Result<Success, Failure>, sourceCancelled: Bool, in queue: inout DrainQueue
    ) {
        if sourceCancelled {
            decideFromCancelledSource(result, in: &queue)
        } else {
            decide(result, cancelled: false, in: &queue)
        }
    }

    @usableFromInline
    internal final func decideFromCancelledSource(_ result: Result<Success, Failure>, in queue: inout DrainQueue) {
        let (passed, cancelled) = passedOn(result, sourceCancelled: true)
        decide(passed, cancelled: cancelled, in: &queue)
    }

    /// The result this attempt takes from a source that finished with `result`.
    ///
    /// Whatever a cancelled source decided, this attempt fails with its cancellation error (the
    /// late-cancel rule every kind follows). Without a cancellation error, a cancelled source's failure
    /// passes on as a cancellation and its success as it is.
    @inlinable
    internal final func passedOn(
        _ result: Result<Success, Failure>, sourceCancelled: Bool
    ) -> (result: Result<Success, Failure>, cancelled: Bool) {
        guard sourceCancelled else {
            return (result, false)
        }
        if let error = cancellationError {
            return (.failure(error), true)
        }
        if case .failure = result {
            return (result, true)
        }
        return (result, false)
    }
}
