public import Synchronization

/// The node of every join of futures (`and`, `allFilled`, `valuesInFillOrder`): it is linked
/// to each input by position, counts the inputs still to arrive, and lets the last arrival
/// complete the join.
///
/// What an arrival does with its value (store it in a slot, or yield it to a stream) and what
/// completion does is up to the subclass; the counting and the links are here, once. The
/// attempt joins (`allSucceeded`, `and`, `firstSucceeded`) count and store with the same parts,
/// ``Synchronization/Atomic/arriveAtJoin()`` and ``JoinSlots``. The join
/// holds no reference to its inputs, so dropping the joined future while they are pending
/// leaks nothing, and a chain of joins of any length fills and releases without recursion.
@usableFromInline
internal class FutureJoin<Element: Sendable>: ChainNode, @unchecked Sendable {
    /// How many inputs have not arrived yet.
    @usableFromInline
    internal let remaining: Atomic<Int>

    @inlinable
    internal init(count: Int) {
        remaining = Atomic(count)
    }

    /// Takes the value of the input at `index`; called once per input, before the count drops.
    @usableFromInline
    internal func receive(_ value: Element, at index: Int, in queue: inout DrainQueue) {}

    /// Completes the join; called once, by the last arrival, after every `receive`.
    @usableFromInline
    internal func complete(in queue: inout DrainQueue) {}

    /// Takes the value of the input at `index` and, if it is the last to arrive, completes
    /// the join.
    ///
    /// The acquiring-and-releasing decrement orders every earlier `receive` before
    /// `complete`.
    @inlinable
    internal final func arrive(at index: Int, with value: Element, in queue: inout DrainQueue) {
        receive(value, at: index, in: &queue)
        if remaining.arriveAtJoin() {
            complete(in: &queue)
        }
    }

    /// Links `input`, the input at `index`, whose value is an element as it is.
    @inlinable
    internal final func link<Input: FutureProtocol>(_ input: Input, at index: Int) where Input.Value == Element {
        input.link(self) { node, value, queue in
            FutureJoin.linked(node).arrive(at: index, with: value, in: &queue)
        }
    }

    /// Links `input`, the input at `index`, whose value `box` turns into an element.
    @inlinable
    internal final func link<Input: FutureProtocol>(
        _ input: Input, at index: Int, box: @escaping @Sendable (Input.Value) -> Element
    ) {
        input.link(self) { node, value, queue in
            FutureJoin.linked(node).arrive(at: index, with: box(value), in: &queue)
        }
    }
}

/// A join that stores each value by position and fills one storage with `combine` of all of
/// them once the last arrives: `allFilled` and `and`.
///
/// `@unchecked Sendable` is sound because each slot is written once, by the one arrival of
/// the input at that position, and the slots are read only by `complete`, which the join's
/// decrement orders after every write.
@usableFromInline
internal final class CollectingJoin<Element: Sendable, Result: Sendable>: FutureJoin<Element>, @unchecked Sendable {
    /// The storage of the joined future.
    @usableFromInline
    internal let result = Storage<Result>()

    /// One slot per input.
    @usableFromInline
    internal let slots: JoinSlots<Element>

    /// Makes the joined value from the values in input order.
    @usableFromInline
    internal let combine: @Sendable ([Element]) -> Result

    @inlinable
    internal init(count: Int, combine: @escaping @Sendable ([Element]) -> Result) {
        slots = JoinSlots(count: count)
        self.combine = combine
        super.init(count: count)
    }

    deinit {
        slots.free()
    }

    @inlinable
    override internal func receive(_ value: Element, at index: Int, in queue: inout DrainQueue) {
        slots.store(value, at: index)
    }

    @inlinable
    override internal func complete(in queue: inout DrainQueue) {
        _ = result.resolve(combine(slots.takeAll()), in: &queue)
    }

    @usableFromInline
    override internal func detachDownstream(to nodes: inout ReleaseStack) {
        nodes.push(result)
    }
}
