/// The loop that runs handlers after a fill, in constant stack space and breadth first.
///
/// Filling a storage runs its handlers; a combinator's handler fills the next storage, whose
/// handlers would run in turn, one call deeper each time. Instead, the outermost fill runs its
/// own handlers directly and parks every storage they complete; ``drain()`` then runs the
/// parked storages' handlers generation by generation. So a chain of any length fills without
/// growing the stack, and every handler of one storage runs before any handler of a storage
/// it completed (a `firstFilled` over a future and its `map` sees the source first).
@usableFromInline
internal struct DrainQueue {
    /// Whether some storage's handlers are running under this queue right now.
    @usableFromInline
    internal var isRunning = false

    /// Storages completed by running handlers, whose own handlers are still to run; `nil`
    /// until the first is parked, so that a plain fill touches no array.
    @usableFromInline
    internal var parked: [ParkedHandlers]? = nil

    @inlinable
    internal init() {}

    /// Runs the handlers `taken` from `storage`: now if nothing is running, else after the
    /// handlers that are running now.
    @inlinable
    internal mutating func runHandlers<Value, Slot>(of storage: DeferredStorage<Value, Slot>, taken: StorageState) {
        if isRunning {
            let entry = ParkedHandlers(storage: storage, taken: taken, run: DeferredStorage<Value, Slot>.runParked)
            if parked == nil {
                parked = [entry]
            } else {
                parked!.append(entry)
            }
        } else {
            isRunning = true
            storage.runHandlers(taken, in: &self)
            isRunning = false
        }
    }

    /// Runs every parked storage's handlers, and whatever those complete, before returning.
    @inlinable
    internal mutating func drain() {
        if parked != nil {
            drainParked()
        }
    }

    @usableFromInline
    internal mutating func drainParked() {
        isRunning = true
        // Two arrays take turns: one is run while the other collects the next generation.
        var spare: [ParkedHandlers]? = []
        while var generation = parked.take(), !generation.isEmpty {
            swap(&parked, &spare)
            for entry in generation {
                entry.run(entry.storage, entry.taken, &self)
            }
            generation.removeAll(keepingCapacity: true)
            spare = consume generation
        }
        isRunning = false
    }
}

/// A filled storage whose handlers wait in a ``DrainQueue``, with the function that runs them
/// (specialized for the storage's value type where the caller is).
@usableFromInline
internal struct ParkedHandlers {
    @usableFromInline
    internal let storage: ChainNode

    @usableFromInline
    internal let taken: StorageState

    @usableFromInline
    internal let run: (ChainNode, StorageState, inout DrainQueue) -> Void

    @inlinable
    internal init(
        storage: ChainNode, taken: StorageState, run: @escaping (ChainNode, StorageState, inout DrainQueue) -> Void
    ) {
        self.storage = storage
        self.taken = taken
        self.run = run
    }
}
