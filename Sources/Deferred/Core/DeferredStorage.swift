public import Dispatch
public import Synchronization

/// The shared, lock-free heart of every unfilled ``Deferred``: a value slot, an inline slot
/// for the first handler, and one atomic word (see ``StorageState``) that orders them.
///
/// The protocol, in short:
/// - `fill` sets *fill claimed* with one atomic OR. The one caller that set it writes the
///   value, then sets *filled* with a second OR, which makes the value visible and hands it
///   every handler added so far.
/// - The first `upon` claims the inline slot with a compare-and-swap, writes the handler,
///   then sets *first ready* with an atomic OR. If that OR finds the value published, the
///   filler did not see the handler, so the registrant runs it. Exactly one of the two sees
///   the other's bit, so the handler runs exactly once.
/// - Later handlers go into chunks of slots (``HandlerChunk``), a stack of them in the word,
///   newest first. A registrant that finds the value published, or the chunk it claimed a
///   slot in closed by the fill before its handler was ready, runs its handler itself.
///
/// `@unchecked Sendable` is sound because every field other than the atomic has at most one
/// writer, ordered by the atomic: `value` is written once, by the caller that claimed the
/// fill, before the releasing exchange that publishes it, and read only after an acquiring
/// load sees *filled*. `firstHandler` is written by the registrant that claimed it before the
/// releasing OR that sets *first ready*, and is then taken by exactly one party: the filler
/// whose acquiring OR saw *first ready*, the registrant whose acquiring OR saw *filled*, or
/// the last owner in `deinit`. A chunk's slots are handed over the same way by the chunk's own
/// word, and the chunks' links are written by the registrant that pushes a chunk before the
/// releasing compare-and-swap that publishes it, then only by the fill or the last owner.
///
/// Subclasses (``MapStorage``, ``AndThenStorage``) add the step that fills them, so a
/// combinator costs one allocation.
@usableFromInline
internal class DeferredStorage<Value: Sendable, Slot: ValueSlot<Value>>: ChainNode, @unchecked Sendable {
    /// The state word; see ``StorageState``.
    @usableFromInline
    internal let state: Atomic<UInt>

    /// The value, once `state` says *filled*.
    ///
    /// Its type is always `Value?`; see ``ValueSlot`` for why it is a generic parameter.
    @exclusivity(unchecked)
    @usableFromInline
    internal final var value: Slot

    /// The first handler added before the fill, stored inline to save an allocation.
    @exclusivity(unchecked)
    @usableFromInline
    internal final var firstHandler: Handler<Value>?

    /// The address bits of the registry of waiters that may give up (tasks in the cancellable
    /// `get()`, threads in a blocking wait), retained by this storage, or zero until the first
    /// such wait.
    ///
    /// Raw bits rather than a generic atomic reference: destroying a generic field in the
    /// unspecialized deinit would look up its metadata on every deallocation.
    ///
    /// Its lowest bit (``recordedBit``; a registry's address is 16-byte aligned) says that
    /// ``PendingFutures`` recorded this storage, so that `deinit` tells it when the storage goes.
    @usableFromInline
    internal let waiterRegistry: Atomic<UInt>

    /// Marks this storage as recorded by ``PendingFutures``: its `deinit` will say when it goes.
    @usableFromInline
    internal final func markRecorded() {
        waiterRegistry.bitwiseOr(recordedBit, ordering: .relaxed)
    }

    /// Whether ``PendingFutures`` recorded this storage.
    @inlinable
    internal final var isTraced: Bool {
        waiterRegistry.load(ordering: .relaxed) & recordedBit != 0
    }

    /// Tells ``PendingFutures`` of `handler`, stored on this recorded storage (or run at once
    /// because the value is there): a stage derived from it, a waiter, a callback.
    @usableFromInline
    internal final func traceStore(_ handler: Handler<Value>) {
        if case .cancelHandler = handler {
            return
        }
        markObserved()
        switch handler {
        case .immediate:
            PendingFutures.addCallback(on: ImmediateExecutor.shared, to: self)
        case .callback(let executor, _), .sourcedCallback(let executor, _):
            PendingFutures.addCallback(on: executor, to: self)
        case .link(let node, _), .sourcedLink(let node, _), .indexedLink(let node, _, _):
            PendingFutures.linked(node, to: self)
        case .cancelHandler:
            break
        }
    }

    override internal var traceKind: TraceNodeKind {
        .stage
    }

    override internal var traceName: String {
        "future"
    }

    /// Undecided: a storage whose fill is claimed is decided, its value on its way on the
    /// filling thread, so a scope closing meanwhile does not count it as left pending.
    override internal var traceIsPending: Bool {
        !StorageState(rawValue: state.load(ordering: .acquiring)).isFillClaimed
    }

    override internal var traceIsWaitedFor: Bool {
        StorageState(rawValue: state.load(ordering: .acquiring)).hasPendingHandlers
    }

    override internal func markTraced() {
        markRecorded()
    }

    override internal func markObserved() {
        waiterRegistry.bitwiseOr(observedBit, ordering: .relaxed)
    }

    /// Records this storage, just made at `file`, `line`, as a `Deferred`'s writer (see
    /// ``PendingFutures``); out of line, so that making a `Deferred` sets up no more than this
    /// call for it.
    @usableFromInline
    @inline(never)
    internal final func recordAsDeferred(file: StaticString, line: UInt) {
        PendingFutures.record(self, typeName: .deferred(Value.self), file: file, line: line)
    }

    /// Records that something read this recorded storage's value; out of line, so that an
    /// inlined reader pays a load and a branch for it.
    @usableFromInline
    @inline(never)
    internal final func traceObserved() {
        markObserved()
    }

    /// Records that the producer released the writer of this recorded storage; out of line, as
    /// ``traceObserved()``.
    @usableFromInline
    @inline(never)
    internal final func traceWriterReleased() {
        PendingFutures.writerReleased(self)
    }

    @inlinable
    override internal init() {
        state = Atomic(StorageState.initial.rawValue)
        value = .none
        firstHandler = nil
        waiterRegistry = Atomic(0)
    }

    /// Creates a storage that is filled with `value` from the start.
    @inlinable
    internal init(filledWith value: Value) {
        state = Atomic(StorageState.published.rawValue)
        self.value = Slot(value)
        firstHandler = nil
        waiterRegistry = Atomic(0)
    }

    deinit {
        let registryWord = waiterRegistry.load(ordering: .acquiring)
        let word = StorageState(rawValue: state.load(ordering: .acquiring))
        // One test for the common storage, with no registry and not recorded.
        if registryWord != 0 {
            let waiters = registryWord & ~traceBits
            if waiters != 0 {
                RetainedBits.release(waiters, as: WaiterRegistry<Value>.self)
            }
            if registryWord & recordedBit != 0 {
                PendingFutures.released(self, lost: word.needsDetach)
            }
        }
        if word.needsDetach {
            var downstream = ReleaseStack()
            detachHandlers(to: &downstream)
            downstream.releaseAll()
        } else if word.overflowHead != 0 {
            // The empty chunks of a filled storage.
            releaseChunks(from: word.overflowHead)
        }
    }

    // MARK: Reading

    /// Whether the value is visible.
    @inlinable
    internal final var isFilled: Bool {
        StorageState(rawValue: state.load(ordering: .acquiring)).isFilled
    }

    /// The value, if it is visible.
    @inlinable
    internal final func peek() -> Value? {
        StorageState(rawValue: state.load(ordering: .acquiring)).isFilled ? value.wrapped : nil
    }

    /// The value of a storage whose value is visible.
    ///
    /// Unlike ``peek()``, an unoptimized caller makes no `Value?` of its own.
    @inlinable
    internal final var filledValue: Value {
        value.unwrapped
    }

    /// The executor that must run for this storage to be filled, where it is known.
    ///
    /// That is the executor of a `map`'s transform. Debug builds use it to catch waits that
    /// cannot succeed.
    @usableFromInline
    internal var fillingExecutor: (any Executor)? {
        nil
    }

    /// Blocks until the value is visible or `time` passes.
    ///
    /// Debug builds trap instead of blocking when the wait could never end with the value; see
    /// ``checkWaitCanSucceed()``.
    @usableFromInline
    internal final func wait(until time: DispatchTime) -> Value? {
        if let value = peek() {
            return value
        }
        #if DEBUG
            checkWaitCanSucceed()
        #endif
        if let value = waitUnfilled(until: time) {
            return value
        }
        // An orphaned storage never gets a value: the wait times out as usual.
        return isOrphaned ? sleepWithoutValue(until: time) : nil
    }

    // MARK: Filling

    /// Fills the storage unless it is filled already, then runs the pending handlers.
    ///
    /// A losing call returns only once the winning value is visible, so `peek()` after a
    /// `false` result never returns `nil`.
    @inlinable
    internal final func fill(_ newValue: Value) -> Bool {
        guard claimFill() else {
            awaitPublication()
            return false
        }
        // A drain queue only where handlers wait: making and destroying an empty one costs
        // some 50 instructions, a tenth of a fill with no handler yet.
        let taken = storeValue(newValue)
        if taken.hasPendingHandlers {
            var queue = DrainQueue()
            queue.runHandlers(of: self, taken: taken)
            queue.drain()
        }
        return true
    }

    /// Fills a storage that only one caller ever fills, then runs the pending handlers: the
    /// claim and the publication in one atomic step.
    ///
    /// For an attempt's ``CancelHandlers``, which only the caller that ends the attempt's demand
    /// fills (see ``AttemptNode/endDemand(_:)``). Every interleaving of this step is one of ``fill(_:)``
    /// whose claim and publication are adjacent, so the storage's protocol holds unchanged.
    @inlinable
    internal final func fillAsSoleFiller(_ newValue: Value) {
        value = Slot(newValue)
        let taken = StorageState(
            rawValue: state.bitwiseOr(
                StorageState.fillClaimedBit | StorageState.filledBit, ordering: .acquiringAndReleasing
            ).oldValue)
        assert(!taken.isFillClaimed, "a storage with a sole filler was filled twice")
        if taken.hasPendingHandlers {
            var queue = DrainQueue()
            queue.runHandlers(of: self, taken: taken)
            queue.drain()
        }
    }

    /// Fills the storage unless a fill has claimed it, and returns whether this call filled it.
    ///
    /// The pending handlers run through `queue`.
    @inlinable
    internal final func resolve(_ newValue: Value, in queue: inout DrainQueue) -> Bool {
        guard claimFill() else {
            return false
        }
        publish(newValue, in: &queue)
        return true
    }

    /// Wins the right to fill the storage, unless another fill has; returns whether this call
    /// won it.
    ///
    /// The winner must then call ``publish(_:in:)``; until it does, readers see no value and a
    /// losing fill waits.
    @inlinable
    internal final func claimFill() -> Bool {
        let before = StorageState(
            rawValue: state.bitwiseOr(StorageState.fillClaimedBit, ordering: .relaxed).oldValue
        )
        return before.winsFillClaim
    }

    /// ``claimFill()`` that also acquires what the last update of the state word released, for a
    /// subclass that reads its own words after the claim (an attempt's demand; see
    /// ``AttemptNode/releaseDemandOnceDecided(cancelled:)``).
    @inlinable
    internal final func claimFillAcquiring() -> Bool {
        let before = StorageState(
            rawValue: state.bitwiseOr(StorageState.fillClaimedBit, ordering: .acquiring).oldValue
        )
        return before.winsFillClaim
    }

    /// Writes the value of a fill that ``claimFill()`` won, makes it visible, and runs the
    /// pending handlers through `queue`.
    @inlinable
    internal final func publish(_ newValue: Value, in queue: inout DrainQueue) {
        let taken = storeValue(newValue)
        if taken.hasPendingHandlers {
            queue.runHandlers(of: self, taken: taken)
        }
    }

    /// Writes the value of a fill that ``claimFill()`` won and makes it visible; returns the
    /// state before, whose pending handlers the caller must run.
    @inlinable
    internal final func storeValue(_ newValue: Value) -> StorageState {
        value = Slot(newValue)
        return StorageState(
            rawValue: state.bitwiseOr(StorageState.filledBit, ordering: .acquiringAndReleasing).oldValue
        )
    }

    /// Runs the handlers a fill took out of the state word.
    ///
    /// The inline handler runs first, then the chunks' handlers, oldest first. Each handler is
    /// released right after it runs; the chunks stay, empty, until the storage goes.
    @inlinable
    internal final func runHandlers(_ taken: StorageState, in queue: inout DrainQueue) {
        let value = self.value.unwrapped
        let owed = taken.publication
        if owed.runsFirst, let first = firstHandler.take() {
            first.run(with: value, from: self, in: &queue)
        }
        guard owed.overflowHead != 0 else {
            return
        }
        // No registrant follows the chunks' links, so the fill may turn the chain around to
        // visit it oldest first, and back so that the word's chunk heads it again.
        let oldestFirst = NodeChain<HandlerChunk<Value>>(head: owed.overflowHead).reversed()
        var bits = oldestFirst.head
        while bits != 0 {
            let chunk = RetainedBits.borrow(bits, as: HandlerChunk<Value>.self)
            chunk.runReadyHandlers(with: value, from: self, in: &queue)
            bits = chunk.next
        }
        _ = oldestFirst.reversed()
    }

    /// Runs the handlers of the parked storage `node`; see ``DrainQueue``.
    @inlinable
    internal static func runParked(_ node: ChainNode, _ taken: StorageState, _ queue: inout DrainQueue) {
        DeferredStorage.linked(node).runHandlers(taken, in: &queue)
    }

    /// Waits for the fill (or orphaning) that beat this caller to publish.
    ///
    /// The winner is a few instructions from publishing, so the wait's initial polling almost
    /// always sees the value before it would sleep.
    @usableFromInline
    internal final func awaitPublication() {
        if !isFilled {
            _ = waitUnfilled(until: .distantFuture)
        }
    }

    // MARK: Releasing

    @usableFromInline
    override internal func detachDownstream(to nodes: inout ReleaseStack) {
        detachHandlers(to: &nodes)
    }

    /// Takes every handler that never ran out of the state word and drops it, moving the
    /// nodes they continue into `nodes` as lost; does nothing once the value is published.
    ///
    /// The last owner of an unfilled storage calls this. A weak reference (an attempt's pending
    /// time limit) may still reach the storage and fill it at the same moment: the update and
    /// the fill's publishing exchange decide which of the two takes the handlers, so each
    /// handler is run or dropped, once.
    @usableFromInline
    internal final func detachHandlers(to nodes: inout ReleaseStack) {
        let (word, taken) = state.update { word in
            let observed = StorageState(rawValue: word)
            return observed.needsDetach ? observed.detached.rawValue : nil
        }
        guard taken else {
            return
        }
        let current = StorageState(rawValue: word)
        if current.isFirstReady, let first = firstHandler.take() {
            first.drop(to: &nodes)
        }
        var chunks = NodeChain<HandlerChunk<Value>>(head: current.overflowHead)
        while let chunk = chunks.popFirst() {
            chunk.dropHandlers(to: &nodes)
        }
    }
}

/// The bit of ``DeferredStorage/waiterRegistry`` that says ``PendingFutures`` recorded the
/// storage.
@inlinable
internal var recordedBit: UInt { 1 }

/// The bit of ``DeferredStorage/waiterRegistry`` that says something received, or registered
/// for, the value of a storage that ``PendingFutures`` recorded.
///
/// A handler, a derived stage, a reader. Only set once the storage is recorded.
@inlinable
internal var observedBit: UInt { 2 }

/// The bits of ``DeferredStorage/waiterRegistry`` that are not the registry's address (which is
/// 16-byte aligned): ``recordedBit`` and ``observedBit``.
@inlinable
internal var traceBits: UInt { 3 }

/// The type of a storage's value slot: `Value?`, and nothing else.
///
/// ``DeferredStorage`` takes its slot type as a generic parameter instead of writing
/// `Value?` in its stored property. A generic class's deinit is not specialized, and to
/// destroy a `Value?` field it would look up `Optional<Value>`'s metadata at run time on
/// every deallocation (about 300 instructions); a slot type that is itself a generic
/// argument comes with the class's metadata for free.
@usableFromInline
internal protocol ValueSlot<Wrapped>: SendableMetatype {
    associatedtype Wrapped

    /// An empty slot.
    static var none: Self { get }

    /// A slot holding `value`.
    init(_ value: Wrapped)

    /// The value in the slot, if any.
    var wrapped: Wrapped? { get }

    /// The value in a slot that holds one. (Read through the slot's own type, an unoptimized
    /// caller needs no `Optional<Wrapped>` metadata of its own.)
    var unwrapped: Wrapped { get }
}

extension Optional: ValueSlot {
    @inlinable
    internal var wrapped: Wrapped? { self }

    @inlinable
    internal var unwrapped: Wrapped { unsafelyUnwrapped }
}

/// The storage of a `Deferred<Value>`.
@usableFromInline
internal typealias Storage<Value: Sendable> = DeferredStorage<Value, Value?>
