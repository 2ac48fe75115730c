public import Synchronization

extension AttemptNode {
    // MARK: The link layer's entry points for attempts

    /// Decides this attempt with what `step` returns, in a drain of its own, if a step of this
    /// attempt may still start (see ``mayStartStep``); otherwise `step` never runs.
    ///
    /// What an executor runs for an attempt's step (`Attempt(upon:catching:)`, a delay's timer) calls this.
    @inlinable
    internal final func runStep(_ step: () -> Result<Success, Failure>) {
        var queue = DrainQueue()
        if mayStartStep {
            decide(step(), cancelled: false, in: &queue)
        }
        queue.drain()
    }

    /// The link step that decides the attempt `node` with a future's value as its success.
    @inlinable
    internal static func succeedLinked(_ node: ChainNode, _ value: Success, _ queue: inout DrainQueue) {
        AttemptNode.linked(node).decide(.success(value), cancelled: false, in: &queue)
    }

    /// The link step that decides the attempt `node` with a future's result.
    @inlinable
    internal static func decideLinked(_ node: ChainNode, _ result: Result<Success, Failure>, _ queue: inout DrainQueue)
    {
        AttemptNode.linked(node).decide(result, cancelled: false, in: &queue)
    }

    /// Adds `handler` through `queue`, with this attempt as the source its step sees.
    @inlinable
    internal final func link(
        _ node: ChainNode,
        in queue: inout DrainQueue,
        _ step: @escaping @Sendable (ChainNode, ChainNode, Result<Success, Failure>, inout DrainQueue) -> Void
    ) {
        if let unstored = storeConsumer(.sourcedLink(node, step)) {
            runUnstored(unstored, in: &queue)
        }
    }

    /// Adds the link of the input at `index` of the join `node` through `queue`, with this
    /// attempt as the source its step sees; the step receives `index` rather than capturing it.
    @inlinable
    internal final func link(
        _ node: ChainNode, at index: Int,
        in queue: inout DrainQueue,
        _ step: @escaping @Sendable (ChainNode, ChainNode, Int, Result<Success, Failure>, inout DrainQueue) -> Void
    ) {
        if let unstored = storeConsumer(.indexedLink(node, index, step)) {
            runUnstored(unstored, in: &queue)
        }
    }

    /// Adds the link of a consumer (a derived stage, a join, a shared run's caller), where it can
    /// give its place back when it leaves: the first in the inline slot, like any handler, the
    /// others in ``consumerLinks``.
    @inlinable
    internal final func addConsumer(_ link: Handler<Result<Success, Failure>>) {
        if let unstored = storeConsumer(link) {
            var queue = DrainQueue()
            runUnstored(unstored, in: &queue)
            queue.drain()
        }
    }

    /// Stores a consumer's link (see ``addConsumer(_:)``), or hands it back if this attempt is
    /// published or orphaned, for the caller to run or drop.
    @inlinable
    internal final func storeConsumer(_ link: Handler<Result<Success, Failure>>) -> Handler<
        Result<Success, Failure>
    >? {
        let word = StorageState(rawValue: state.load(ordering: .acquiring))
        guard word.isFirstClaimed, !word.isFilled else {
            return store(link)
        }
        return storeApart(link)
    }

    /// Stores a consumer's link after the first in the attempt's ``ConsumerLinks``, which its
    /// ``WaiterRegistry`` keeps, making them on first use.
    @inlinable
    internal final func storeApart(_ link: Handler<Result<Success, Failure>>) -> Handler<Result<Success, Failure>>? {
        guard let registry = waiters() else {
            return store(link)  // Published meanwhile: the link runs now.
        }
        return registry.consumerLinks().add(link, to: self)
    }

    /// Counts a consumer that left while this attempt stays pending, so that the links of the
    /// consumers that left are removed once they are a fixed share (see ``ConsumerLinks``).
    @inlinable
    internal final func consumerLeft(to nodes: inout ReleaseStack) {
        if waiterRegistry.load(ordering: .relaxed) & ~traceBits != 0 {
            departed(to: &nodes)
        }
    }

    /// Counts a departure in the consumer links, if this attempt made them.
    @usableFromInline
    internal final func departed(to nodes: inout ReleaseStack) {
        let bits = waiterRegistry.load(ordering: .acquiring) & ~traceBits
        RetainedBits.borrow(bits, as: SideRegistry.self).anyConsumerLinks?.departed(to: &nodes)
    }

    /// The source attempt of a step: the storage that runs a ``Handler/sourcedLink(_:_:)``
    /// added by ``link(_:in:_:)``, which is always an attempt node of this type.
    @inlinable
    internal static func source(_ node: ChainNode) -> AttemptNode {
        AttemptNode.linked(node)
    }
}

extension AttemptNode {
    /// Finishes this attempt with `next`'s result once it has one, holding `next`'s demand
    /// until then.
    ///
    /// A `next` that has finished passes its result on at once.
    @inlinable
    internal final func follow(_ next: AttemptNode, in queue: inout DrainQueue) {
        if let result = next.peek() {
            // Finished already (`Attempt(succeededWith:)`, say): there is no demand to hold on it.
            // (An orphaned `next` has no result: linking to it below orphans this attempt.)
            decide(passing: result, sourceCancelled: next.isCancelledFlag, in: &queue)
            return
        }
        if !hold(next), decideCancelled(in: &queue) {
            return  // Stopped meanwhile: nobody needs `next` through this attempt.
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

extension Attempt {
    /// Links `derived` to this attempt with `step`, running it at once if this attempt has
    /// finished, and returns it as an attempt.
    ///
    /// If the deadline ledger tracks this attempt, the new stage is tracked too (unless
    /// `tracksItself`: a stage with a deadline of its own tells the ledger itself), so that it
    /// counts as a consumer without a deadline until it has one, and deadlines set below it reach
    /// the producer.
    @inlinable
    internal func attach<NewSuccess, NewFailure>(
        _ derived: AttemptNode<NewSuccess, NewFailure>,
        _ step: @escaping @Sendable (ChainNode, ChainNode, Result<Success, Failure>, inout DrainQueue) -> Void,
        tracksItself: Bool = false
    ) -> Attempt<NewSuccess, NewFailure> {
        // A drain queue only where the step runs now: storing the link needs none.
        node.addConsumer(.sourcedLink(derived, step))
        if !tracksItself && node.isTracked {
            DeadlineLedger.shared.track(derived, own: nil)
        }
        return Attempt<NewSuccess, NewFailure>(node: derived)
    }
}
