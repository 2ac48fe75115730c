public import Synchronization

extension FutureProtocol {
    /// Returns a future filled with a tuple of this future's value and the others' values,
    /// once all of them are filled.
    ///
    /// The futures may have different value types, and any number of them may be joined:
    ///
    /// ```swift
    /// let profile = name.and(age, avatar)  // Future<(String, Int, Image)>
    /// profile.upon(.main) { name, age, avatar in show(name, age, avatar) }
    /// ```
    ///
    /// The joined future holds no reference to the inputs, so dropping it while they are
    /// pending leaks nothing. Chains of `and` of any length fill and release without growing
    /// the stack.
    ///
    /// - Parameter others: The futures to join with this one.
    /// - Returns: A read-only future of all the values, in argument order.
    @inlinable
    public func and<each Other: FutureProtocol>(
        _ others: repeat each Other
    ) -> Future<(Value, repeat (each Other).Value)> {
        var count = 1
        for _ in repeat each others {
            count += 1
        }
        let join = CollectingJoin<any Sendable, (Value, repeat (each Other).Value)>(count: count) { values in
            var index = 0
            func next<Element>(_: Element.Type) -> Element {
                defer { index += 1 }
                return values[index] as! Element
            }
            return (next(Value.self), repeat next((each Other).Value.self))
        }
        join.link(self, at: 0) { $0 }
        var index = 0
        for other in repeat each others {
            index += 1
            join.link(other, at: index) { $0 }
        }
        return Future(storage: join.result)
    }
}

extension Collection where Element: FutureProtocol {
    /// Returns a future filled with the values of all these futures, in the order of the
    /// collection, once the last of them is filled.
    ///
    /// ```swift
    /// let pages: [Future<Page>] = ids.map { api.page($0) }
    /// pages.allFilled().upon(.main) { pages in show(pages) }
    /// ```
    ///
    /// An empty collection gives a future that is filled at once with `[]`. The joined future
    /// holds no reference to the input futures, so dropping it while they are pending leaks
    /// nothing.
    ///
    /// - Returns: A read-only future of every value, in collection order.
    @inlinable
    public func allFilled() -> Future<[Element.Value]> {
        let count = self.count
        guard count > 0 else {
            return Future(filledWith: [])
        }
        let join = CollectingJoin<Element.Value, [Element.Value]>(count: count) { $0 }
        var index = 0
        for future in self {
            join.link(future, at: index)
            index += 1
        }
        return Future(storage: join.result)
    }
}

extension Sequence where Element: FutureProtocol {
    /// Returns a future filled with the value of whichever of these futures is filled first.
    ///
    /// ```swift
    /// let fastest = [primary.lookup(key), replica.lookup(key)].firstFilled()
    /// ```
    ///
    /// The later values are ignored. An empty sequence gives ``Future/never``.
    ///
    /// - Returns: A read-only future of the first value delivered.
    @inlinable
    public func firstFilled() -> Future<Element.Value> {
        let first = Storage<Element.Value>()
        var isEmpty = true
        for future in self {
            isEmpty = false
            future.link(first, Storage<Element.Value>.forward)
            if first.isFilled {
                break
            }
        }
        return isEmpty ? .never : Future(storage: first)
    }
}

extension Sequence where Element: FutureProtocol {
    /// Returns the values of these futures as an asynchronous sequence, in the order they are
    /// filled, ending after the last.
    ///
    /// ```swift
    /// for await page in pageFutures.valuesInFillOrder() {
    ///     show(page)  // the fastest first
    /// }
    /// ```
    ///
    /// Values that arrive before they are read are buffered. If the iterating task is
    /// cancelled, the sequence ends.
    ///
    /// - Returns: A stream of every value, in the order the futures were filled.
    public func valuesInFillOrder() -> AsyncStream<Element.Value> {
        let (stream, continuation) = AsyncStream<Element.Value>.makeStream()
        let futures = Array(self)
        guard !futures.isEmpty else {
            continuation.finish()
            return stream
        }
        let join = FillOrderJoin(count: futures.count, continuation: continuation)
        for (index, future) in futures.enumerated() {
            join.link(future, at: index)
        }
        return stream
    }
}

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
    override internal var traceKind: TraceNodeKind {
        .join
    }

    override internal var traceOutput: ChainNode? {
        result
    }

    override internal var traceName: String {
        "join"
    }

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

/// The values a join collects by position: one slot per input, written once by that input's
/// delivery and taken all at once by the arrival that completes the join.
///
/// The slots are not synchronized: the join that owns them orders every write before the
/// taking read (through the acquiring-and-releasing decrement of its count of missing inputs),
/// and frees them in its `deinit`.
///
/// A slot is raw memory with a flag beside it rather than an optional, so that unspecialized code
/// needs only the value's own type, never a look-up of `Optional<Value>`'s.
@usableFromInline
internal struct JoinSlots<Value> {
    /// The values, initialized where ``stored`` says so.
    @usableFromInline
    internal let values: UnsafeMutablePointer<Value>

    /// Whether each slot holds a value; in the same allocation, after the values.
    @usableFromInline
    internal let stored: UnsafeMutablePointer<Bool>

    /// How many slots there are.
    @usableFromInline
    internal let count: Int

    /// Allocates `count` empty slots.
    @inlinable
    internal init(count: Int) {
        let valueBytes = MemoryLayout<Value>.stride * count
        let memory = UnsafeMutableRawPointer.allocate(
            byteCount: valueBytes + count, alignment: MemoryLayout<Value>.alignment)
        values = memory.bindMemory(to: Value.self, capacity: count)
        stored = (memory + valueBytes).bindMemory(to: Bool.self, capacity: count)
        stored.initialize(repeating: false, count: count)
        self.count = count
    }

    /// Stores the value of the input at `index`.
    @inlinable
    internal func store(_ value: Value, at index: Int) {
        (values + index).initialize(to: value)
        stored[index] = true
    }

    /// Takes every value, in position order; every slot has been written.
    @inlinable
    internal func takeAll() -> [Value] {
        [Value](unsafeUninitializedCapacity: count) { taken, initialized in
            taken.baseAddress.unsafelyUnwrapped.moveInitialize(from: values, count: count)
            stored.update(repeating: false, count: count)
            initialized = count
        }
    }

    /// Releases the values still stored and the slots.
    @inlinable
    internal func free() {
        for index in 0..<count where stored[index] {
            (values + index).deinitialize(count: 1)
        }
        UnsafeMutableRawPointer(values).deallocate()
    }
}

extension Atomic where Value == Int {
    /// Counts one arrival at a join whose count of inputs still to arrive is this atomic;
    /// returns whether it was the last: what every join of the library counts with
    /// (``FutureJoin`` for futures, the attempt joins for `allSucceeded`, `and` and
    /// `firstSucceeded`).
    ///
    /// The acquiring-and-releasing decrement orders every earlier arrival's writes (its slot)
    /// before whatever the last arrival reads.
    @inlinable
    internal func arriveAtJoin() -> Bool {
        subtract(1, ordering: .acquiringAndReleasing).newValue == 0
    }
}

/// The join of `valuesInFillOrder`: yields each input's value to a stream as it arrives, and
/// finishes the stream after the last.
///
/// `AsyncStream.Continuation` is `Sendable` and may be used from any thread.
@usableFromInline
internal final class FillOrderJoin<Element: Sendable>: FutureJoin<Element>, @unchecked Sendable {
    /// Where the values go.
    @usableFromInline
    internal let continuation: AsyncStream<Element>.Continuation

    @usableFromInline
    internal init(count: Int, continuation: AsyncStream<Element>.Continuation) {
        self.continuation = continuation
        super.init(count: count)
    }

    @usableFromInline
    override internal func receive(_ value: Element, at index: Int, in queue: inout DrainQueue) {
        continuation.yield(value)
    }

    @usableFromInline
    override internal func complete(in queue: inout DrainQueue) {
        continuation.finish()
    }
}
