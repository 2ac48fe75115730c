/// An attempt that waits for its source, then for another attempt that a step starts from the
/// source's result: the node behind `andThen` and `fallback`.
///
/// It owns its hub. While it waits for the source, the hub holds a unit of the source's demand;
/// once the step has started the next attempt, the hub holds a unit of the next attempt's
/// demand instead. Cancelling it, or giving up every unit on its hub, releases whichever unit it
/// holds, which cancels that attempt unless something else needs it.
@usableFromInline
internal class FollowingAttemptNode<Input: Sendable, Success: Sendable, Failure: Error>:
    AttemptNode<Success, Failure>, @unchecked Sendable
{
    /// Where the step runs; `nil` stands for the immediate executor.
    @usableFromInline
    internal let executor: (any Executor)?

    @inlinable
    internal init(on source: Attempt<Input, Failure>, executor: (any Executor)?) {
        self.executor = executor
        super.init(owningHubWith: source.node.cancellation)
        hold(source.node)
    }

    /// The result to pass on without running the step, or `nil` to run it.
    @usableFromInline
    internal func passedOn(_ input: Result<Input, Failure>) -> Result<Success, Failure>? {
        fatalError("abstract")
    }

    /// Runs the step, once, and returns the attempt it started or the error it threw; `nil` if
    /// it ran already.
    @usableFromInline
    internal func runStep(_ input: Result<Input, Failure>) -> Result<Attempt<Success, Failure>, Failure>? {
        fatalError("abstract")
    }

    /// Drops the step unrun, releasing its captures.
    @usableFromInline
    internal func dropStep() {
        fatalError("abstract")
    }

    /// The link step that the source's handler runs.
    @inlinable
    internal static func receive(
        _ source: ChainNode, _ node: ChainNode, _ input: Result<Input, Failure>, _ queue: inout DrainQueue
    ) {
        let node = unsafeDowncast(node, to: FollowingAttemptNode.self)
        if AttemptNode<Input, Failure>.source(source).isCancelledFlag,
            let error = input.failure ?? node.cancellationError
        {
            node.dropStep()
            node.decide(.failure(error), cancelled: true, in: &queue)
        } else if let result = node.passedOn(input) {
            node.dropStep()
            node.decide(result, cancelled: false, in: &queue)
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

    @inlinable
    internal final func start(_ input: Result<Input, Failure>, in queue: inout DrainQueue) {
        guard mayStartStep(in: &queue), let next = runStep(input) else {
            dropStep()
            return
        }
        switch next {
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
        let unit = source.takeDemand(handOver: true)
        let (exchanged, previous) = consumerHub().upstream.exchangeUnlessTagged(unit)
        if let previous = previous as? AttemptHub {
            AttemptHub.releaseUnit(on: previous)
        }
        guard exchanged else {
            if let unit {
                AttemptHub.releaseUnit(on: unit)
            }
            return false
        }
        if unit == nil {
            source.settleIfAbandoned()
        }
        return true
    }

    /// Finishes this attempt with `next`'s result once it has one, holding `next`'s demand
    /// until then; decides it as cancelled instead if nobody needs it any more.
    @inlinable
    internal final func follow(_ next: AttemptNode, in queue: inout DrainQueue) {
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
        let node = unsafeDowncast(node, to: AttemptNode.self)
        let (passed, cancelled) = node.passedOn(result, sourceCancelled: AttemptNode.source(source).isCancelledFlag)
        node.decide(passed, cancelled: cancelled, in: &queue)
    }

    /// The result this attempt takes from a source that finished with `result`: a cancelled
    /// source's failure, or this attempt's cancellation error if the source was cancelled after
    /// it succeeded, passes on as a cancellation.
    @inlinable
    internal final func passedOn(
        _ result: Result<Success, Failure>, sourceCancelled: Bool
    ) -> (result: Result<Success, Failure>, cancelled: Bool) {
        guard sourceCancelled else {
            return (result, false)
        }
        if case .failure = result {
            return (result, true)
        }
        guard let error = cancellationError else {
            return (result, false)
        }
        return (.failure(error), true)
    }
}
