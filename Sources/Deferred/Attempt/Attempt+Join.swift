public import Synchronization

extension Collection {
    /// Returns an attempt that succeeds with every value, in collection order, once all these
    /// attempts succeed, and fails as soon as one fails, with that error.
    ///
    /// ```swift
    /// let pages = ids.map(api.page).allSucceeded()   // Attempt<[Page], APIError>
    /// ```
    ///
    /// The failure is the first in time, not in collection order. When the joined attempt
    /// fails or is cancelled, the attempts still running are cancelled, unless something else
    /// needs them; if one of them is cancelled, the joined attempt is cancelled too. An empty
    /// collection succeeds at once with `[]`.
    ///
    /// - Returns: An attempt of all the values.
    @inlinable
    public func allSucceeded<Success, Failure>() -> Attempt<[Success], Failure>
    where Element == Attempt<Success, Failure> {
        guard let first = first else {
            return Attempt(filledWith: .success([]))
        }
        let join = AllSucceededAttemptNode<Success, [Success], Failure>(
            count: count, cancellation: first.node.cancellation, combine: { $0 })
        join.holdDemand(of: self) { $0.node.heldByConsumer() }
        join.linkAllSucceeding(self)
        return Attempt(node: join)
    }
}

extension Sequence {
    /// Returns an attempt that succeeds with the value of whichever of these attempts succeeds
    /// first, and fails with the last failure if all fail.
    ///
    /// ```swift
    /// let reply = [primary.lookup(key), replica.lookup(key)].firstSucceeded()
    /// ```
    ///
    /// Once one succeeds, the others are cancelled, unless something else needs them. If every
    /// one fails and the last was cancelled, the result is cancelled too. An empty sequence
    /// gives an attempt that never finishes unless it is cancelled, like ``Future/never``.
    ///
    /// - Returns: An attempt of the first value.
    public func firstSucceeded<Success, Failure>() -> Attempt<Success, Failure>
    where Element == Attempt<Success, Failure> {
        let attempts = Array(self)
        let join = FirstSucceededAttemptNode<Success, Failure>(
            count: attempts.count, cancellation: attempts.first?.node.cancellation)
        join.holdDemand(of: attempts) { $0.node.heldByConsumer() }
        var queue = DrainQueue()
        for (index, input) in attempts.enumerated() where !join.isDecided {
            join.link(input, at: index, in: &queue) { $0 }
        }
        queue.drain()
        return Attempt(node: join)
    }
}

extension Attempt {
    /// Returns an attempt that succeeds with a tuple of this attempt's value and the others'
    /// values once all of them succeed, and fails as soon as one fails, with that error.
    ///
    /// The attempts may have different success types and share one failure type:
    ///
    /// ```swift
    /// let screen = api.user(id).and(api.avatar(id), api.settings())  // Attempt<(User, Image, Settings), APIError>
    /// ```
    ///
    /// Like ``Swift/Collection/allSucceeded()``, a failure or cancellation cancels the attempts
    /// still running unless something else needs them.
    ///
    /// - Parameter others: The attempts to join with this one.
    /// - Returns: An attempt of all the values, in argument order.
    public func and<each Other: Sendable>(
        _ others: repeat Attempt<each Other, Failure>
    ) -> Attempt<(Success, repeat each Other), Failure> {
        // Each input's unit is taken before any input is linked, so that a join that fails at
        // once still releases them.
        var held = [node.heldByConsumer()]
        for other in repeat each others {
            held.append(other.node.heldByConsumer())
        }
        let join = AllSucceededAttemptNode<any Sendable, (Success, repeat each Other), Failure>(
            count: held.count, cancellation: node.cancellation
        ) { values in
            var index = 0
            func next<Value>(_: Value.Type) -> Value {
                defer { index += 1 }
                return values[index] as! Value
            }
            return (next(Success.self), repeat next((each Other).self))
        }
        join.holdDemand(of: held) { $0 }
        var queue = DrainQueue()
        join.link(self, at: 0, in: &queue) { $0 }
        var index = 0
        for other in repeat each others {
            index += 1
            join.link(other, at: index, in: &queue) { $0 }
        }
        queue.drain()
        return Attempt<(Success, repeat each Other), Failure>(node: join)
    }
}

/// A join of several attempts: holds one unit of demand per input (see ``HeldInputs``), and
/// stores what each input delivers.
@usableFromInline
internal class JoinAttemptNode<Element: Sendable, Success: Sendable, Failure: Error>: AttemptNode<Success, Failure>,
    @unchecked Sendable
{
    /// How many inputs have not delivered yet, plus ``lostInput`` for each input that never
    /// will (it was orphaned).
    @usableFromInline
    internal let remaining: Atomic<Int>

    /// What an input that will never deliver adds to ``remaining``, besides counting as
    /// arrived: the bits above any count of inputs.
    @inlinable
    internal static var lostInput: Int { 1 << 32 }

    @usableFromInline
    internal init(count: Int, cancellation: CancellationErrorBox<Failure>?) {
        remaining = Atomic(count)
        super.init(cancellation: cancellation)
    }

    /// Counts the arrival of an input's result: whether it was the last, and if so whether an
    /// input was lost, which leaves the join to be orphaned.
    @inlinable
    internal final func countArrival() -> JoinArrival {
        let left = remaining.subtract(1, ordering: .acquiringAndReleasing).newValue
        if left == 0 {
            return .last
        }
        return left & (Self.lostInput - 1) == 0 ? .lastAfterLoss : .waiting
    }

    /// An input was orphaned: it counts as arrived, without a result.
    ///
    /// Once every input has
    /// arrived and none decided the join, nothing can: it is orphaned.
    @usableFromInline
    override internal func lostDecider(to nodes: inout ReleaseStack) {
        let left = remaining.add(Self.lostInput - 1, ordering: .acquiringAndReleasing).newValue
        if left & (Self.lostInput - 1) == 0 {
            loseDeciders(to: &nodes)
        }
    }

    /// Stores what the input at `index` delivered.
    @usableFromInline
    internal func arrive(
        at index: Int, with result: Result<Element, Failure>, cancelled: Bool, in queue: inout DrainQueue
    ) {
        fatalError("abstract")
    }

    /// Holds what `held` gives for each of `inputs`, once, before the inputs are linked.
    ///
    /// `held` gives the input's node if it took a unit of its demand (see
    /// ``AttemptNode/heldByConsumer()``); held first, the units are released even by a join that
    /// fails at once.
    @inlinable
    internal final func holdDemand<Inputs: Collection>(of inputs: Inputs, _ held: (Inputs.Element) -> ChainNode?) {
        var nodes: [ChainNode] = []
        nodes.reserveCapacity(inputs.count)
        var tracked = false
        // By position rather than by iterator, which would hand out each input retained.
        var position = inputs.startIndex
        while position != inputs.endIndex {
            if let node = held(inputs[position]) {
                // Read here, where the list is this function's own, asking retains no input.
                tracked = tracked || node.hasTrackedSource
                nodes.append(node)
            }
            inputs.formIndex(after: &position)
        }
        if !nodes.isEmpty {
            hold(taken: HeldInputs(nodes), tracked: tracked)
        }
    }

    /// Links `input`, the input at `index`, whose value `box` turns into an element.
    @usableFromInline
    internal final func link<Input: Sendable>(
        _ input: Attempt<Input, Failure>, at index: Int, in queue: inout DrainQueue,
        box: @escaping @Sendable (Input) -> Element
    ) {
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
    override internal var traceName: String {
        "allSucceeded"
    }

    @usableFromInline
    internal let slots: JoinSlots<Element>

    @usableFromInline
    internal let combine: @Sendable ([Element]) -> Success

    @usableFromInline
    internal init(
        count: Int, cancellation: CancellationErrorBox<Failure>?, combine: @escaping @Sendable ([Element]) -> Success
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
        take(result, at: index, cancelled: cancelled, in: &queue)
    }

    /// Takes what the input at `index` delivered; the body of ``arrive(at:with:cancelled:in:)``.
    @inlinable
    internal final func take(
        _ result: Result<Element, Failure>, at index: Int, cancelled: Bool, in queue: inout DrainQueue
    ) {
        if !cancelled, case .success(let value) = result {
            arrive(at: index, withValue: value, in: &queue)
        } else {
            arrive(at: index, passing: result, cancelled: cancelled, in: &queue)
        }
    }

    /// Links each of `inputs` by position, with steps that call ``take(_:at:cancelled:in:)``
    /// rather than the overridden arrival: inlined where the join is made, a success and the
    /// join's completion run specialized, with no look-up of generic metadata.
    @inlinable
    internal final func linkAllSucceeding(_ inputs: some Collection<Attempt<Element, Failure>>) {
        var queue = DrainQueue()
        // By position rather than by iterator, which would hand out each input retained.
        var position = inputs.startIndex
        var index = 0
        while position != inputs.endIndex && !isDecided {
            inputs[position].node.link(self, at: index, in: &queue) { source, node, index, result, queue in
                AllSucceededAttemptNode.linked(node).take(
                    result, at: index, cancelled: AttemptNode<Element, Failure>.source(source).isCancelledFlag,
                    in: &queue)
            }
            inputs.formIndex(after: &position)
            index += 1
        }
        queue.drain()
    }

    /// Stores the value of the input at `index`; the last to arrive completes the join.
    @inlinable
    internal func arrive(at index: Int, withValue value: Element, in queue: inout DrainQueue) {
        slots.store(value, at: index)
        switch countArrival() {
        case .last: succeed(in: &queue)
        case .lastAfterLoss: orphan()
        case .waiting: break
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
    override internal var traceName: String {
        "firstSucceeded"
    }

    @usableFromInline
    override internal func arrive(
        at index: Int, with result: Result<Success, Failure>, cancelled: Bool, in queue: inout DrainQueue
    ) {
        if case .success = result, !cancelled {
            decide(result, cancelled: false, in: &queue)
        } else {
            switch countArrival() {
            case .last: decide(passing: result, sourceCancelled: cancelled, in: &queue)
            case .lastAfterLoss: orphan()
            case .waiting: break
            }
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

/// What one arrival at an attempt join means.
@usableFromInline
internal enum JoinArrival {
    /// Inputs are still to arrive.
    case waiting
    /// It was the last input, and every input delivered.
    case last
    /// It was the last input, and another was lost: nothing can decide the join any more.
    case lastAfterLoss
}
