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

    /// The oldest storage completed by running handlers whose own handlers are still to run.
    ///
    /// A chain parks one storage at a time, so the queue's front lives here, inline: a plain
    /// fill and a chain's links touch no array.
    @usableFromInline
    internal var front: ParkedHandlers? = nil

    /// The storages parked behind ``front``, oldest first, from index ``next`` on; `nil` until
    /// two are parked at once.
    @usableFromInline
    internal var behind: [ParkedHandlers]? = nil

    /// The index of the oldest entry of ``behind`` still to run.
    @usableFromInline
    internal var next = 0
    /// The reference to the node whose link step runs now, handed over by the step's handler;
    /// see ``runStep(of:_:)``.
    @usableFromInline
    internal var handedOver: ChainNode? = nil

    @inlinable
    internal init() {}

    /// Creates a queue that parks every completion until it drains, as if it were running.
    @inlinable
    internal init(parking: Bool) {
        isRunning = parking
    }

    /// Runs the handlers `taken` from `storage`: now if nothing is running, else after the
    /// handlers that are running now and every storage parked before it.
    @inlinable
    internal mutating func runHandlers<Value, Slot>(of storage: DeferredStorage<Value, Slot>, taken: StorageState) {
        if isRunning {
            let run = DeferredStorage<Value, Slot>.runParked
            if let handed = handedOver, handed === storage {
                // The running step's own node: the entry takes the handler's reference.
                park(ParkedHandlers(storage: handedOver.take().unsafelyUnwrapped, taken: taken, run: run))
            } else {
                park(ParkedHandlers(storage: storage, taken: taken, run: run))
            }
        } else {
            isRunning = true
            storage.runHandlers(taken, in: &self)
            isRunning = false
        }
    }

    /// Runs the link step `body` of `node`, taking over the reference the step's handler held.
    ///
    /// A step that completes its own node parks it here, and the parked entry takes this
    /// reference instead of retaining the node and releasing the handler's copy after the step:
    /// two atomic read-modify-writes fewer a stage of a chain. Otherwise the reference is
    /// released once the step returns, as the handler's would be.
    ///
    /// Steps nest: a step that follows a filled future runs that future's link at once, and a
    /// queue that is not running yet runs a completed node's handlers in place. So the outer
    /// step's reference is set aside for the inner step and put back after, and each step's
    /// node stays held until its own step returns.
    @inlinable
    internal mutating func runStep(of node: consuming ChainNode, _ body: (ChainNode, inout DrainQueue) -> Void) {
        let reference = Unmanaged.passUnretained(node)
        let outer = handedOver.take()
        handedOver = consume node
        // Sound: the node stays alive through the step, held by `handedOver` or by the entry
        // that took it, which runs only once the step has returned.
        reference._withUnsafeGuaranteedRef { body($0, &self) }
        handedOver = consume outer
    }

    /// Queues `entry` behind every storage parked before it.
    @usableFromInline
    internal mutating func park(_ entry: consuming ParkedHandlers) {
        if front == nil {
            front = entry
        } else if behind == nil {
            behind = [entry]
        } else {
            behind!.append(entry)
        }
    }

    /// Runs `body` with the handlers of every storage it completes parked, then runs them.
    ///
    /// What `body` does after a completion (report a run's end, cancel the work a time limit
    /// gave up on) is done before any of those handlers runs; within a running queue, they run
    /// when it drains, as they would anyway.
    @inlinable
    internal mutating func parkingCompletions(_ body: (inout DrainQueue) -> Void) {
        let wasRunning = isRunning
        isRunning = true
        body(&self)
        isRunning = wasRunning
        if !wasRunning {
            drain()
        }
    }

    /// Runs `body` with a new queue, then drains it: how code that runs under no queue (a
    /// combinator, a fill) starts one.
    @inlinable
    internal static func draining(_ body: (inout DrainQueue) -> Void) {
        var queue = DrainQueue()
        body(&queue)
        queue.drain()
    }

    /// Runs every parked storage's handlers, and whatever those complete, before returning.
    @inlinable
    internal mutating func drain() {
        if front != nil {
            drainParked()
        }
    }

    /// Runs parked storages oldest first, so the storages are visited breadth first: every
    /// storage a handler completes runs after the storages parked before it.
    @usableFromInline
    internal mutating func drainParked() {
        isRunning = true
        while let entry = front {
            front = nil
            if behind?.isEmpty == false {
                promoteBehind()
            }
            entry.run(entry.storage, entry.taken, &self)
        }
        isRunning = false
    }

    /// Moves the oldest entry of ``behind`` to ``front``; the array is emptied, keeping its
    /// capacity, once every entry has moved.
    @usableFromInline
    internal mutating func promoteBehind() {
        front = behind![next]
        next += 1
        if next == behind!.count {
            behind!.removeAll(keepingCapacity: true)
            next = 0
        }
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
