public import Synchronization

/// Collects the values of several futures, by position, and fills one storage with the array
/// once the last of them arrives.
///
/// `@unchecked Sendable` is sound because each slot is written once, by the one handler run
/// of the future at that position, and the slots are read only by the arrival that brings
/// `remaining` to zero; the acquiring-and-releasing decrement orders every write before
/// that read.
@usableFromInline
internal final class AllFilledJoin<Value: Sendable>: ChainNode, @unchecked Sendable {
    /// The storage of the joined future.
    @usableFromInline
    internal let result = Storage<[Value]>()

    /// One slot per future.
    @usableFromInline
    internal let slots: JoinSlots<Value>

    /// How many futures have not delivered yet.
    @usableFromInline
    internal let remaining: Atomic<Int>

    @inlinable
    internal init(count: Int) {
        remaining = Atomic(count)
        slots = JoinSlots(count: count)
    }

    deinit {
        // What `slots.free()` does, spelled out: calling it here crashes Swift 6.3's ownership
        // verifier in release builds (a method call in the deinit of a class with an `Atomic`).
        slots.slots.deinitialize()
        slots.slots.deallocate()
    }

    /// Stores the value of the future at `index`; the last arrival fills the result.
    @inlinable
    internal func arrive(at index: Int, with value: Value, in queue: inout DrainQueue) {
        slots.store(value, at: index)
        if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
            _ = result.resolve(slots.takeAll(), in: &queue)
        }
    }

    @usableFromInline
    override internal func detachDownstream(to nodes: inout ReleaseStack) {
        nodes.push(result)
    }
}
