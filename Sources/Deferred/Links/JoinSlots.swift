public import Synchronization

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
