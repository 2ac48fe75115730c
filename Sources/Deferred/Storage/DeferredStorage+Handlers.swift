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
        var observed = StorageState(rawValue: state.load(ordering: .acquiring))
        while true {
            switch observed.registration {
            case .runNow:
                handler.run(with: value.unwrapped, from: self, in: &queue)
                return
            case .claimFirst(let claimed):
                let (exchanged, original) = state.compareExchange(
                    expected: observed.rawValue,
                    desired: claimed.rawValue,
                    successOrdering: .relaxed,
                    failureOrdering: .acquiring
                )
                guard exchanged else {
                    observed = StorageState(rawValue: original)
                    continue
                }
                firstHandler = handler
                let before = StorageState(
                    rawValue: state.bitwiseOr(StorageState.firstReadyBit, ordering: .acquiringAndReleasing).oldValue
                )
                if before.firstHandlerRunner == .registrant, let handler = firstHandler.take() {
                    handler.run(with: value.unwrapped, from: self, in: &queue)
                }
                return
            case .pushOverflow:
                pushOverflow(handler, observed: observed, in: &queue)
                return
            }
        }
    }

    /// Pushes `handler` onto the overflow stack, or runs it if the value becomes visible first.
    @inlinable
    internal final func pushOverflow(_ handler: Handler<Value>, observed: StorageState, in queue: inout DrainQueue) {
        let node = HandlerNode(handler)
        let bits = HandlerNode.retainedBits(of: node)
        var observed = observed
        while case .push(let pushed) = observed.overflowPush(bits) {
            node.next = observed.overflowHead
            let (exchanged, original) = state.compareExchange(
                expected: observed.rawValue,
                desired: pushed.rawValue,
                successOrdering: .releasing,
                failureOrdering: .acquiring
            )
            if exchanged {
                return
            }
            observed = StorageState(rawValue: original)
        }
        _ = HandlerNode<Value>.takeRetained(bits)
        handler.run(with: value.unwrapped, from: self, in: &queue)
    }

    /// The registry of tasks awaiting the value, made and linked on first use; `nil` once
    /// the value is visible.
    @usableFromInline
    internal final func waiters() -> AsyncWaiters<Value>? {
        guard !isFilled else {
            return nil
        }
        let existing = asyncWaiters.load(ordering: .acquiring)
        if existing != 0 {
            return Unmanaged<AsyncWaiters<Value>>.fromOpaque(UnsafeRawPointer(bitPattern: existing)!)
                .takeUnretainedValue()
        }
        let made = AsyncWaiters<Value>()
        let bits = UInt(bitPattern: Unmanaged.passRetained(made).toOpaque())
        let (stored, winner) = asyncWaiters.compareExchange(
            expected: 0,
            desired: bits,
            successOrdering: .releasing,
            failureOrdering: .acquiring
        )
        guard stored else {
            Unmanaged<AsyncWaiters<Value>>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!).release()
            return Unmanaged<AsyncWaiters<Value>>.fromOpaque(UnsafeRawPointer(bitPattern: winner)!)
                .takeUnretainedValue()
        }
        add(.link(made, AsyncWaiters<Value>.resumeAll))
        return made
    }
}
