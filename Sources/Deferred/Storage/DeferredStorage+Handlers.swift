public import Synchronization

extension DeferredStorage {
    /// Calls `body` with the value on `executor` once the storage is filled.
    @inlinable
    internal final func upon<E: Executor>(_ executor: E, execute body: @escaping @Sendable (Value) -> Void) {
        if let value = peek() {
            executor.run(body, with: value)
        } else {
            add(Handler(executor, body))
        }
    }

    /// Adds `handler`, running it at once if the value is already visible (dropping it if the
    /// storage is orphaned).
    @inlinable
    internal final func add(_ handler: consuming Handler<Value>) {
        // A drain queue only where a handler runs: storing one needs none.
        if let runNow = store(consume handler) {
            var queue = DrainQueue()
            runUnstored(runNow, in: &queue)
            queue.drain()
        }
    }

    /// Adds `handler`; if the value is already visible, runs it through `queue` instead.
    @inlinable
    internal final func add(_ handler: consuming Handler<Value>, in queue: inout DrainQueue) {
        if let runNow = store(consume handler) {
            runUnstored(runNow, in: &queue)
        }
    }

    /// Stores `handler` for the fill to run, or hands it back if the value is visible, for the
    /// caller to run now.
    @inlinable
    internal final func store(_ handler: consuming Handler<Value>) -> Handler<Value>? {
        let (word, claimedFirst) = state.update { observed in
            guard case .claimFirst(let claimed) = StorageState(rawValue: observed).registration else {
                return nil
            }
            return claimed.rawValue
        }
        let observed = StorageState(rawValue: word)
        if claimedFirst {
            firstHandler = consume handler
            let before = StorageState(
                rawValue: state.bitwiseOr(StorageState.firstReadyBit, ordering: .acquiringAndReleasing).oldValue
            )
            return before.firstHandlerRunner == .registrant ? firstHandler.take() : nil
        }
        if observed.registration == .runNow {
            return consume handler
        }
        return storeInChunk(consume handler, observed: observed)
    }

    /// Puts `handler` into the newest chunk, or a new chunk if that one is full, or hands it
    /// back if the value becomes visible first.
    @inlinable
    internal final func storeInChunk(_ handler: consuming Handler<Value>, observed: StorageState) -> Handler<Value>? {
        // Moved through a variable into the closure and back, so that it is never copied.
        var pending = Optional(handler)
        var capacity = 2
        if observed.overflowHead != 0 {
            // The storage, which the caller holds, keeps the chunk alive: no retain needed.
            let placement = RetainedBits.withBorrowed(observed.overflowHead, as: HandlerChunk<Value>.self) {
                $0.place(pending.take()!)
            }
            switch placement {
            case .stored:
                return nil
            case .runNow(let unstored):
                return unstored
            case .full(let unstored, let nextCapacity):
                pending = unstored
                capacity = nextCapacity
            }
        }
        let chunk = HandlerChunk<Value>.make(capacity: capacity, holding: pending.take()!)
        let bits = RetainedBits.retain(chunk)
        let pushed = state.update(from: observed.rawValue) { observed in
            let observed = StorageState(rawValue: observed)
            guard case .push(let pushed) = observed.overflowPush(bits) else {
                return nil
            }
            chunk.next = observed.overflowHead
            return pushed.rawValue
        }.updated
        guard pushed else {
            RetainedBits.release(bits, as: HandlerChunk<Value>.self)
            return chunk.takeFirstHandler()
        }
        return nil
    }

    /// The registry of waiters that may give up, made and linked on first use; `nil` once the
    /// value is visible.
    @usableFromInline
    internal final func waiters() -> WaiterRegistry<Value>? {
        guard !isFilled else {
            return nil
        }
        let existing = waiterRegistry.load(ordering: .acquiring) & ~recordedBit
        if existing != 0 {
            return RetainedBits.borrow(existing)
        }
        let made = WaiterRegistry<Value>()
        let bits = RetainedBits.retain(made)
        // Keeps the bit that says `PendingFutures` recorded this storage.
        let (winner, stored) = waiterRegistry.update { $0 & ~recordedBit == 0 ? bits | ($0 & recordedBit) : nil }
        guard stored else {
            RetainedBits.release(bits, as: WaiterRegistry<Value>.self)
            return RetainedBits.borrow(winner & ~recordedBit)
        }
        add(.link(made, WaiterRegistry<Value>.resumeAll))
        return made
    }
}
