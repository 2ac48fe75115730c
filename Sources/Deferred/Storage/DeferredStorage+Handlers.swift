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

    /// Adds `handler`, running it at once if the value is already visible.
    @inlinable
    internal final func add(_ handler: Handler<Value>) {
        var queue = DrainQueue()
        add(handler, in: &queue)
        queue.drain()
    }

    /// Adds `handler`; if the value is already visible, runs it through `queue` instead.
    @inlinable
    internal final func add(_ handler: Handler<Value>, in queue: inout DrainQueue) {
        let (word, claimedFirst) = state.update { observed in
            guard case .claimFirst(let claimed) = StorageState(rawValue: observed).registration else {
                return nil
            }
            return claimed.rawValue
        }
        let observed = StorageState(rawValue: word)
        if claimedFirst {
            firstHandler = handler
            let before = StorageState(
                rawValue: state.bitwiseOr(StorageState.firstReadyBit, ordering: .acquiringAndReleasing).oldValue
            )
            if before.firstHandlerRunner == .registrant, let handler = firstHandler.take() {
                handler.run(with: value.unwrapped, from: self, in: &queue)
            }
        } else if observed.registration == .runNow {
            handler.run(with: value.unwrapped, from: self, in: &queue)
        } else {
            pushOverflow(handler, observed: observed, in: &queue)
        }
    }

    /// Pushes `handler` onto the overflow stack, or runs it if the value becomes visible first.
    @inlinable
    internal final func pushOverflow(_ handler: Handler<Value>, observed: StorageState, in queue: inout DrainQueue) {
        let node = HandlerNode(handler)
        let bits = RetainedBits.retain(node)
        let pushed = state.update(from: observed.rawValue) { observed in
            let observed = StorageState(rawValue: observed)
            guard case .push(let pushed) = observed.overflowPush(bits) else {
                return nil
            }
            node.next = observed.overflowHead
            return pushed.rawValue
        }.updated
        if !pushed {
            RetainedBits.release(bits, as: HandlerNode<Value>.self)
            handler.run(with: value.unwrapped, from: self, in: &queue)
        }
    }

    /// The registry of waiters that may give up, made and linked on first use; `nil` once the
    /// value is visible.
    @usableFromInline
    internal final func waiters() -> WaiterRegistry<Value>? {
        guard !isFilled else {
            return nil
        }
        let existing = waiterRegistry.load(ordering: .acquiring)
        if existing != 0 {
            return RetainedBits.borrow(existing)
        }
        let made = WaiterRegistry<Value>()
        let bits = RetainedBits.retain(made)
        let (winner, stored) = waiterRegistry.update { $0 == 0 ? bits : nil }
        guard stored else {
            RetainedBits.release(bits, as: WaiterRegistry<Value>.self)
            return RetainedBits.borrow(winner)
        }
        add(.link(made, WaiterRegistry<Value>.resumeAll))
        return made
    }
}
