public import Synchronization

/// A join of several attempts: owns a hub that holds one unit of demand per input, and stores
/// what each input delivers.
@usableFromInline
internal class JoinAttemptNode<Element: Sendable, Success: Sendable, Failure: Error>: AttemptNode<Success, Failure>,
    @unchecked Sendable
{
    /// How many inputs have not delivered yet.
    @usableFromInline
    internal let remaining: Atomic<Int>

    @usableFromInline
    internal init(count: Int, cancellation: CancellationErrorSource<Failure>?) {
        remaining = Atomic(count)
        super.init(owningHubWith: cancellation)
    }

    /// Stores what the input at `index` delivered.
    @usableFromInline
    internal func arrive(
        at index: Int, with result: Result<Element, Failure>, cancelled: Bool, in queue: inout DrainQueue
    ) {
        fatalError("abstract")
    }

    /// Makes the hub hold a unit of demand of each of `inputs`; called once, before the inputs
    /// are linked, so that a join that fails at once still releases them.
    @usableFromInline
    internal final func holdDemand(of inputs: [any DemandSource]) {
        var units: [DemandUnit] = []
        for input in inputs {
            if let unit = input.takeUnit(forOwner: true) {
                units.append(unit)
            } else {
                input.settleIfAbandoned()
            }
        }
        if !consumerHub().holdUpstream(units).held {
            for unit in units {
                unit.release()
            }
        }
    }

    /// Links each of `inputs` by position, stopping once the join is decided (the rest need no
    /// link), and runs what the links completed.
    @usableFromInline
    internal final func linkAll(_ inputs: some Sequence<Attempt<Element, Failure>>) {
        var queue = DrainQueue()
        var index = 0
        for input in inputs {
            guard !isDecided else {
                break
            }
            link(input, at: index, in: &queue)
            index += 1
        }
        queue.drain()
    }

    /// Links `input`, the input at `index`, whose value is an element as it is.
    @usableFromInline
    internal final func link(_ input: Attempt<Element, Failure>, at index: Int, in queue: inout DrainQueue) {
        input.node.link(self, in: &queue) { source, node, result, queue in
            JoinAttemptNode.linked(node).arrive(
                at: index, with: result, cancelled: AttemptNode<Element, Failure>.source(source).isCancelledFlag,
                in: &queue)
        }
    }

    /// Links `input`, the input at `index`, whose value `box` turns into an element, and runs
    /// what the link completes.
    @usableFromInline
    internal final func link<Input: Sendable>(
        _ input: Attempt<Input, Failure>,
        at index: Int,
        box: @escaping @Sendable (Input) -> Element
    ) {
        var queue = DrainQueue()
        defer { queue.drain() }
        input.node.link(self, in: &queue) { source, node, result, queue in
            JoinAttemptNode.linked(node).arrive(
                at: index, with: result.map(box),
                cancelled: AttemptNode<Input, Failure>.source(source).isCancelledFlag, in: &queue)
        }
    }
}

/// The join of `allSucceeded` and `and`: succeeds once every input succeeded, fails at the first
/// failure.
///
/// `@unchecked Sendable` is sound because each slot is written once, by the one handler run of
/// the input at that position, and the slots are read only by the arrival that brings
/// `remaining` to zero; the acquiring-and-releasing decrement orders every write before that
/// read.
@usableFromInline
internal final class AllSucceededAttemptNode<Element: Sendable, Success: Sendable, Failure: Error>:
    JoinAttemptNode<Element, Success, Failure>, @unchecked Sendable
{
    @usableFromInline
    internal let slots: JoinSlots<Element>

    @usableFromInline
    internal let combine: @Sendable ([Element]) -> Success

    @usableFromInline
    internal init(
        count: Int, cancellation: CancellationErrorSource<Failure>?, combine: @escaping @Sendable ([Element]) -> Success
    ) {
        slots = JoinSlots(count: count)
        self.combine = combine
        super.init(count: count, cancellation: cancellation)
    }

    deinit {
        slots.free()
    }

    // The arrival of a success from an input that was not cancelled, the common case, is
    // apart from the rest so that it makes no `Result` of its own: unoptimized, a function looks
    // up the metadata of every such local on entry, whichever branch it takes.
    @usableFromInline
    override internal func arrive(
        at index: Int, with result: Result<Element, Failure>, cancelled: Bool, in queue: inout DrainQueue
    ) {
        if !cancelled, case .success(let value) = result {
            arrive(at: index, withValue: value, in: &queue)
        } else {
            arrive(at: index, passing: result, cancelled: cancelled, in: &queue)
        }
    }

    /// Stores the value of the input at `index`; the last to arrive completes the join.
    @inlinable
    internal func arrive(at index: Int, withValue value: Element, in queue: inout DrainQueue) {
        slots.store(value, at: index)
        if remaining.arriveAtJoin() {
            succeed(in: &queue)
        }
    }

    /// Succeeds with every input's value.
    @inlinable
    internal func succeed(in queue: inout DrainQueue) {
        decide(.success(combine(slots.takeAll())), cancelled: false, in: &queue)
    }

    /// Takes a failure, or the result of a cancelled input, by what it passes on.
    @inlinable
    internal func arrive(
        at index: Int, passing result: Result<Element, Failure>, cancelled: Bool, in queue: inout DrainQueue
    ) {
        switch passedOn(result, cancelled: cancelled) {
        case .success(let value):
            arrive(at: index, withValue: value, in: &queue)
        case .failure(let error):
            decide(.failure(error), cancelled: cancelled, in: &queue)
        }
    }
}

/// The join of `firstSucceeded`: succeeds with the first success, fails with the last failure.
@usableFromInline
internal final class FirstSucceededAttemptNode<Success: Sendable, Failure: Error>:
    JoinAttemptNode<Success, Success, Failure>, @unchecked Sendable
{
    @usableFromInline
    override internal func arrive(
        at index: Int, with result: Result<Success, Failure>, cancelled: Bool, in queue: inout DrainQueue
    ) {
        if case .success = result, !cancelled {
            decide(result, cancelled: false, in: &queue)
        } else if remaining.arriveAtJoin() {
            decide(passing: result, sourceCancelled: cancelled, in: &queue)
        }
    }
}

extension JoinAttemptNode {
    /// What an input's result means for the join: whatever a cancelled input decided, it
    /// passes on as the join's cancellation error (without one, as it is).
    @usableFromInline
    internal func passedOn(_ result: Result<Element, Failure>, cancelled: Bool) -> Result<Element, Failure> {
        guard cancelled, let error = cancellationError else {
            return result
        }
        return .failure(error)
    }
}

/// An attempt node seen without its types: what a join needs to hold demand on inputs of
/// different types.
@usableFromInline
internal protocol DemandSource: AnyObject {
    /// See ``AttemptNode/takeUnit(forOwner:)``.
    func takeUnit(forOwner: Bool) -> DemandUnit?
    /// See ``AttemptNode/settleIfAbandoned()``.
    func settleIfAbandoned()
}

extension AttemptNode: DemandSource {}
