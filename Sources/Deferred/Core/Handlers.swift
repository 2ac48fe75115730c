public import Synchronization

/// Code waiting for a storage's value.
@usableFromInline
internal enum Handler<Value: Sendable> {
    /// A callback added with `upon(.immediate)`: runs in place, in the drain loop. (The anchor is
    /// there only so that every case starts with a word that has an object reference's spare
    /// bits, where the enum keeps its tag; see ``HandlerAnchor``.)
    case immediate(HandlerAnchor, @Sendable (Value) -> Void)

    /// A callback added with `upon` on any other executor: submitted to it.
    case callback(any Executor, @Sendable (Value) -> Void)

    /// A step of one of the library's combinators. `node` is what the step continues (the
    /// storage it fills, or a join), kept here so that releasing an unfilled chain can walk
    /// it without recursion. `step` receives the node, the value and the running drain queue,
    /// so whatever it completes runs in the caller's drain loop rather than a nested call.
    case link(ChainNode, @Sendable (ChainNode, Value, inout DrainQueue) -> Void)

    /// A step of an attempt combinator: like ``link``, and the step also receives the storage
    /// that runs it (the source attempt), to read how that attempt finished.
    case sourcedLink(ChainNode, @Sendable (_ source: ChainNode, _ node: ChainNode, Value, inout DrainQueue) -> Void)

    /// A step of a join: like ``sourcedLink``, and the step also receives `index`, the position
    /// of the input it continues, kept here rather than captured, so that linking an input makes
    /// and counts no closure context.
    case indexedLink(
        ChainNode, Int,
        @Sendable (_ source: ChainNode, _ node: ChainNode, _ index: Int, Value, inout DrainQueue) -> Void)

    /// A callback of an attempt (`uponSuccess`, `uponFailure`): like ``callback``, and `body`
    /// also receives the storage that runs it, to read whether the attempt was cancelled when
    /// the body starts. Receiving it rather than capturing it keeps a pending attempt from
    /// holding itself through its own handler.
    case sourcedCallback(any Executor, @Sendable (_ source: ChainNode, Value) -> Void)

    /// A producer's cancel handler, in an attempt's ``CancelHandlers`` (a storage of an optional
    /// ``CancellationReason``, filled with why the attempt stopped): runs `body` in place if there
    /// is a reason, and drops it otherwise. A case of its own, rather than an immediate callback that tests the value, so
    /// that adding one wraps `body` in no closure of its own. (The anchor is there for the same
    /// reason as in ``immediate(_:_:)``.)
    case cancelHandler(HandlerAnchor, @Sendable () -> Void)

    /// A callback that runs `body` on `executor`.
    @inlinable
    internal init<E: Executor>(_ executor: E, _ body: @escaping @Sendable (Value) -> Void) {
        if E.self == ImmediateExecutor.self {
            self = .immediate(HandlerAnchor(), body)
        } else {
            self = .callback(executor, body)
        }
    }

    /// Runs this handler with the value that `source` was filled with.
    ///
    /// Consumes the handler, so that its node and step move into the call instead of being
    /// retained for it and released after.
    @inlinable
    internal consuming func run(with value: Value, from source: ChainNode, in queue: inout DrainQueue) {
        switch consume self {
        case .immediate(_, let body):
            body(value)
        case .callback(let executor, let body):
            executor.submit { body(value) }
        case .link(let node, let step):
            queue.runStep(of: node) { node, queue in step(node, value, &queue) }
        case .sourcedLink(let node, let step):
            queue.runStep(of: node) { node, queue in step(source, node, value, &queue) }
        case .indexedLink(let node, let index, let step):
            queue.runStep(of: node) { node, queue in step(source, node, index, value, &queue) }
        case .sourcedCallback(let executor, let body):
            if executor.runsInPlace {
                body(source, value)
            } else {
                executor.submit { body(source, value) }
            }
        case .cancelHandler(_, let body):
            if value as? CancellationReason != nil {
                body()
            }
        }
    }

    /// The chain node this handler continues, if it is a link.
    @inlinable
    internal var linkedNode: ChainNode? {
        switch self {
        case .link(let node, _), .sourcedLink(let node, _), .indexedLink(let node, _, _): node
        case .immediate, .callback, .sourcedCallback, .cancelHandler: nil
        }
    }
}

/// The first field of ``Handler/immediate(_:_:)`` and ``Handler/cancelHandler(_:_:)``: a word
/// with the spare bits of an object reference, so that every case of ``Handler`` starts with
/// one and the enum keeps its tag there (32 bytes; 33, and a stride of 40, without it).
///
/// It is ``ImmediateExecutor``'s metatype, which code in any module reaches as a constant,
/// where a shared instance would be made lazily behind a once-guard on every use; copying and
/// dropping it count no references, and reflection (`dump`, `Mirror`) reads it as the type it
/// is.
@frozen
@usableFromInline
internal struct HandlerAnchor: Sendable {
    @usableFromInline
    internal let type: ImmediateExecutor.Type

    @inlinable
    internal init() {
        type = ImmediateExecutor.self
    }
}

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
        var position = HandlerPosition()
        return store(handler, at: &position)
    }

    /// Stores `handler` as ``store(_:)`` does, and sets `position` to where it went (unchanged
    /// if the handler is handed back).
    @inlinable
    internal final func store(_ handler: consuming Handler<Value>, at position: inout HandlerPosition) -> Handler<
        Value
    >? {
        // Moved into either branch, never borrowed first, so that the untraced path stores it as
        // it did before there was tracing.
        if isTraced {
            return storeTraced(handler, at: &position)
        }
        return storeUntraced(handler, at: &position)
    }

    /// ``store(_:at:)`` for a storage that ``PendingFutures`` recorded.
    ///
    /// Tells it of `handler` first. Out of line, so that it adds nothing to the inlined path.
    @usableFromInline
    internal final func storeTraced(_ handler: consuming Handler<Value>, at position: inout HandlerPosition) -> Handler<
        Value
    >? {
        traceStore(handler)
        return storeUntraced(handler, at: &position)
    }

    /// ``store(_:at:)`` without telling ``PendingFutures``.
    @inlinable
    internal final func storeUntraced(_ handler: consuming Handler<Value>, at position: inout HandlerPosition)
        -> Handler<Value>?
    {
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
        return storeInChunk(consume handler, observed: observed, at: &position)
    }

    /// Puts `handler` into the newest chunk, or a new chunk if that one is full, or hands it
    /// back if the value becomes visible first.
    @inlinable
    internal final func storeInChunk(
        _ handler: consuming Handler<Value>, observed: StorageState, at position: inout HandlerPosition
    ) -> Handler<Value>? {
        // Moved through a variable into the closure and back, so that it is never copied.
        var pending = Optional(handler)
        var capacity = 2
        if observed.overflowHead != 0 {
            // The storage, which the caller holds, keeps the chunk alive: no retain needed.
            let placement = RetainedBits.withBorrowed(observed.overflowHead, as: HandlerChunk<Value>.self) {
                $0.place(pending.take()!)
            }
            switch placement {
            case .stored(let index):
                position = HandlerPosition(chunk: observed.overflowHead, claims: index + 1)
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
        position = HandlerPosition(chunk: bits, claims: 1)
        return nil
    }

    /// Whether the handler stored at `position` is still the newest: no handler was stored
    /// after it (one that a registrant claimed a slot for, written or not, counts).
    ///
    /// A registrant sees every handler that its own thread stored before.
    @usableFromInline
    internal final func isNewestHandler(at position: HandlerPosition) -> Bool {
        let head = StorageState(rawValue: state.load(ordering: .acquiring)).overflowHead
        guard head == position.chunk else {
            return false
        }
        // The storage keeps its chunks alive: no retain needed.
        return head == 0
            || RetainedBits.withBorrowed(head, as: HandlerChunk<Value>.self) { $0.claims } == position.claims
    }

    /// The registry of waiters that may give up, made and linked on first use; `nil` once the
    /// value is visible.
    @inlinable
    internal final func waiters() -> WaiterRegistry<Value>? {
        guard !isFilled else {
            return nil
        }
        let existing = waiterRegistry.load(ordering: .acquiring) & ~traceBits
        if existing != 0 {
            return RetainedBits.borrow(existing)
        }
        let made = WaiterRegistry<Value>()
        if isTraced {
            made.tracedSource = self
        }
        let bits = RetainedBits.retain(made)
        // Keeps the bit that says `PendingFutures` recorded this storage.
        let (winner, stored) = waiterRegistry.update { $0 & ~traceBits == 0 ? bits | ($0 & traceBits) : nil }
        guard stored else {
            RetainedBits.release(bits, as: WaiterRegistry<Value>.self)
            return RetainedBits.borrow(winner & ~traceBits)
        }
        add(.link(made, WaiterRegistry<Value>.resumeAll))
        return made
    }
}

/// Where a storage stored a handler: the inline slot, or a chunk with the number of slots
/// claimed in it up to and including the handler's.
@frozen
@usableFromInline
internal struct HandlerPosition: Equatable {
    /// The address bits of the chunk, or zero for the inline slot.
    @usableFromInline
    internal var chunk: UInt = 0

    /// How many slots of `chunk` were claimed once the handler's was.
    @usableFromInline
    internal var claims = 0

    @inlinable
    internal init() {}

    @inlinable
    internal init(chunk: UInt, claims: Int) {
        self.chunk = chunk
        self.claims = claims
    }
}
