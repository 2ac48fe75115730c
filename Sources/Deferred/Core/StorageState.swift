/// The decoded state word of a ``DeferredStorage``: the pure half of the lock-free protocol.
///
/// One machine word holds everything the protocol needs:
///
/// | bits  | meaning                                                             |
/// |-------|---------------------------------------------------------------------|
/// | 0     | *fill claimed*: one `fill` won the right to write the value          |
/// | 1     | *filled*: the value is written and visible to every reader           |
/// | 2     | *first claimed*: one registrant owns the inline handler slot         |
/// | 3     | *first ready*: that registrant has written the inline handler        |
/// | 4–63  | address of the newest ``HandlerChunk``, or zero                      |
///
/// The fill sets *filled* with an OR, so the other bits stay as they were: the chunks stay
/// linked (the storage releases them when it goes), and every party reads *filled* before
/// anything else.
///
/// This type only computes. ``DeferredStorage`` performs the atomic operations and asks this
/// type what each party must do next, so every decision is testable without threads.
@frozen
@usableFromInline
internal struct StorageState: StateWord {
    @usableFromInline internal var rawValue: UInt
    @inlinable internal init(rawValue: UInt) { self.rawValue = rawValue }
}

extension StorageState {
    @inlinable internal static var fillClaimedBit: UInt { 1 << 0 }
    @inlinable internal static var filledBit: UInt { 1 << 1 }
    @inlinable internal static var firstClaimedBit: UInt { 1 << 2 }
    @inlinable internal static var firstReadyBit: UInt { 1 << 3 }
    @inlinable internal static var flagBits: UInt { (1 << 4) - 1 }

    /// A new storage: no value, no handlers.
    @inlinable
    internal static var initial: StorageState { StorageState(rawValue: 0) }

    /// The state of a storage made with its value.
    ///
    /// Handlers are never added to a filled storage; they run at once instead.
    @inlinable
    internal static var published: StorageState { StorageState(rawValue: fillClaimedBit | filledBit) }

    /// Whether a `fill` has won the right to write the value (it may not be visible yet).
    @inlinable
    internal var isFillClaimed: Bool { has(Self.fillClaimedBit) }

    /// Whether the value is written and may be read.
    @inlinable
    internal var isFilled: Bool { has(Self.filledBit) }

    /// Whether a registrant owns the inline handler slot.
    @inlinable
    internal var isFirstClaimed: Bool { has(Self.firstClaimedBit) }

    /// Whether the inline handler slot holds a handler that nobody has taken yet.
    @inlinable
    internal var isFirstReady: Bool { has(Self.firstReadyBit) }

    /// The address bits of the newest handler chunk, or zero if there is none.
    @inlinable
    internal var overflowHead: UInt { rawValue & ~Self.flagBits }

    /// Whether a fill that found this state has handlers to run.
    @inlinable
    internal var hasPendingHandlers: Bool { isFirstReady || overflowHead != 0 }

    /// This state with `node` (the address bits of a 16-byte aligned object) as the newest
    /// handler chunk.
    @inlinable
    internal func pushing(_ node: UInt) -> StorageState {
        assert(node & Self.flagBits == 0, "handler chunks must be 16-byte aligned")
        return StorageState(rawValue: (rawValue & Self.flagBits) | node)
    }

    // MARK: Transitions
    //
    // Each party of the protocol does one atomic operation at a time and decides what to do
    // next from the word that operation returned. These functions are those decisions.

    /// Whether a fill whose claiming OR returned this word won the right to write the value.
    @inlinable
    internal var winsFillClaim: Bool { !isFillClaimed }

    /// What a fill owes once its publishing OR found this word: the inline handler if it was
    /// ready, and the handlers of the chunks pushed so far.
    @inlinable
    internal var publication: Publication {
        Publication(runsFirst: isFirstReady, overflowHead: overflowHead)
    }

    /// Who runs the inline handler, once its registrant's OR of *first ready* returned this
    /// word: the registrant if the value was published by then (the fill did not see the
    /// handler), the fill otherwise.
    @inlinable
    internal var firstHandlerRunner: FirstHandlerRunner { isFilled ? .registrant : .fill }

    /// What a registrant that observed this word does with a new handler chunk (`node`, the
    /// address bits of a 16-byte aligned object): push it by moving to the returned state, or
    /// run its handler now because the value is published.
    @inlinable
    internal func overflowPush(_ node: UInt) -> OverflowPush {
        isFilled ? .runNow : .push(pushing(node))
    }

    /// Whether the last owner of a storage in this state has handlers to drop: it was never
    /// filled and handlers were stored.
    @inlinable
    internal var needsDetach: Bool { !isFilled && hasPendingHandlers }

    /// The word the last owner leaves once it has taken the handlers and their chunks: the
    /// flags of the fill and of the inline slot's claim, no handler.
    @inlinable
    internal var detached: StorageState {
        StorageState(rawValue: rawValue & (Self.fillClaimedBit | Self.filledBit | Self.firstClaimedBit))
    }

    /// What a registrant that observed this state does with its handler.
    @inlinable
    internal var registration: Registration {
        if isFilled { return .runNow }
        if !isFirstClaimed { return .claimFirst(StorageState(rawValue: rawValue | Self.firstClaimedBit)) }
        return .pushOverflow
    }

    /// The next step for a handler that is being added.
    @frozen
    @usableFromInline
    internal enum Registration: Equatable {
        /// The value is visible: run the handler now instead of storing it.
        case runNow
        /// Try to own the inline slot by moving to the given state.
        case claimFirst(StorageState)
        /// The inline slot is taken: put the handler into the newest chunk, or a new one.
        case pushOverflow
    }

    /// What a fill owes the handlers stored before it published.
    @frozen
    @usableFromInline
    internal struct Publication: Equatable {
        /// Whether the inline handler is the fill's to run.
        @usableFromInline
        internal let runsFirst: Bool

        /// The address bits of the newest handler chunk, or zero if there is none.
        @usableFromInline
        internal let overflowHead: UInt

        @inlinable
        internal init(runsFirst: Bool, overflowHead: UInt) {
            self.runsFirst = runsFirst
            self.overflowHead = overflowHead
        }
    }

    /// Who runs the inline handler.
    @frozen
    @usableFromInline
    internal enum FirstHandlerRunner: Equatable {
        /// The fill took it with the word; the registrant leaves it.
        case fill
        /// The value was published before the handler was ready: the registrant runs it.
        case registrant
    }

    /// The next step for a handler chunk that is being pushed.
    @frozen
    @usableFromInline
    internal enum OverflowPush: Equatable {
        /// Try to move to the given state, which has the node on top.
        case push(StorageState)
        /// The value is visible: run the handler now and free the chunk.
        case runNow
    }
}
