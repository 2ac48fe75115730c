public import Synchronization

/// The values a join collects by position: one slot per input, written once by that input's
/// delivery and taken all at once by the arrival that completes the join.
///
/// The slots are not synchronized: the join that owns them orders every write before the
/// taking read (through the acquiring-and-releasing decrement of its count of missing inputs),
/// and frees them in its `deinit`.
@usableFromInline
internal struct JoinSlots<Value> {
    @usableFromInline
    internal let slots: UnsafeMutableBufferPointer<Value?>

    /// Allocates `count` empty slots.
    @inlinable
    internal init(count: Int) {
        slots = .allocate(capacity: count)
        slots.initialize(repeating: nil)
    }

    /// Stores the value of the input at `index`.
    @inlinable
    internal func store(_ value: Value, at index: Int) {
        slots[index] = value
    }

    /// Takes every value, in position order; every slot has been written.
    @inlinable
    internal func takeAll() -> [Value] {
        [Value](unsafeUninitializedCapacity: slots.count) { values, initialized in
            for index in 0..<slots.count {
                (values.baseAddress.unsafelyUnwrapped + index).initialize(to: slots[index].take().unsafelyUnwrapped)
            }
            initialized = slots.count
        }
    }

    /// Releases whatever is left in the slots and frees them; for the owner's `deinit`.
    @inlinable
    internal func free() {
        slots.deinitialize()
        slots.deallocate()
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
