import Testing

@testable import Deferred

/// The storage's lock-free protocol, checked over every interleaving without threads.
///
/// Fills and registrants each take one atomic step at a time on a plain ``StorageState`` and on
/// plain ``HandlerChunkState`` words, and decide what to do next with the same transitions the
/// storage and its chunks use (`registration`, `winsFillClaim`, `firstHandlerRunner`,
/// `overflowPush`, `publication`, `needsDetach`, `detached`, `claimOutcome`,
/// `readyHandlerRunner`). A search runs every order of their steps and checks guarantees 1–3 at
/// the end of each: one fill wins; every handler runs exactly once, or, if the storage is
/// released unfilled, is dropped exactly once; and the handlers that the fill runs, it runs in
/// the order each registrant added them. An *orphaning* (a fill that wins without a value and
/// drops what it takes: what an attempt does once nothing can decide it) races fills and
/// registrants the same way: if it wins, every handler is dropped exactly once, by it or by the
/// registrant that finds the storage published, and none runs; every party, including a losing
/// fill that waits for the publication, finds the storage published in the end, so nothing
/// waits for a publication that never comes. (A cancellation is a fill at this level, and a
/// wait is a registrant whose handler wakes it when run or dropped.) Chunks are made small here
/// (one or two slots, growing to two or four), so that few handlers fill them and every path of
/// a chunk is taken.
@Suite struct StorageProtocolModelTests {
    /// Fills, and the handlers each registrant adds in turn.
    @Test(arguments: [
        (1, [1]), (1, [1, 1]), (1, [1, 1, 1]), (2, [1, 1]), (3, [1, 1]),
        (1, [3]), (1, [2, 2]), (1, [3, 2]), (2, [2, 1]), (1, [1, 1, 2]),
    ])
    func everyInterleavingOfFillsAndRegistrationsRunsEachHandlerOnceAndInOrder(_ fills: Int, _ registrants: [Int]) {
        for chunks in ChunkSizes.all {
            expectEveryInterleavingHolds(ModelSearch(fills: fills, registrants: registrants, chunks: chunks))
        }
    }

    /// An orphaning races fills and registrations: one of them wins; if the orphaning did,
    /// every handler is dropped once and none runs.
    @Test(arguments: [
        (0, [1]), (0, [1, 1]), (0, [2, 1]), (1, [1]), (1, [1, 1]), (0, [3]), (1, [2]), (2, [1]), (0, [1, 1, 1]),
    ])
    func everyInterleavingOfAnOrphaningDropsOrRunsEachHandlerOnce(_ fills: Int, _ registrants: [Int]) {
        for chunks in ChunkSizes.all {
            expectEveryInterleavingHolds(
                ModelSearch(fills: fills, registrants: registrants, chunks: chunks, orphaning: true))
        }
    }

    /// A storage's last owner releases it while a weak reference (an attempt's pending time
    /// limit) fills it: each stored handler is run by the fill or dropped by the release, once.
    @Test(arguments: [[1], [2], [3], [2, 2], [4]])
    func aFillRacingTheReleaseOfTheStorageRunsOrDropsEachHandlerOnce(_ registrants: [Int]) {
        for chunks in ChunkSizes.all {
            expectEveryInterleavingHolds(
                ModelSearch(fills: 1, registrants: registrants, chunks: chunks, releasedWhileFilling: true))
        }
    }

    @Test(arguments: [[1, 1], [1, 1, 1], [2, 2], [3, 1], [4, 1]])
    func anUnfilledStorageReleasedAfterAnyRegistrationsDropsEachHandlerOnce(_ registrants: [Int]) {
        for chunks in ChunkSizes.all {
            expectEveryInterleavingHolds(ModelSearch(fills: 0, registrants: registrants, chunks: chunks))
        }
    }

    private func expectEveryInterleavingHolds(_ search: ModelSearch) {
        var search = search
        search.explore()
        let (failures, first) = (search.failures.count, search.failures.first ?? "")
        #expect(failures == 0, "\(search.chunks), first: \(first)")
        #expect(search.endings > 1, "explored \(search.states) states, \(search.endings) of them final")
    }
}

/// The slots of the model's chunks: the first chunk's, and the most any chunk has.
private struct ChunkSizes: Hashable, CustomStringConvertible {
    let first: Int
    let maximum: Int

    static let all = [ChunkSizes(first: 1, maximum: 2), ChunkSizes(first: 2, maximum: 4)]

    var description: String { "chunks of \(first) to \(maximum) slots" }
}

/// A handler of the model: who added it, and which of theirs it is.
private struct ModelHandler: Hashable {
    let registrant: Int
    let index: Int
}

/// A chunk of the model.
private struct ModelChunk: Hashable {
    var control: HandlerChunkState
    var slots: [ModelHandler?]
    var next: UInt
}

/// The shared memory of the model: the state word, the inline slot and the chunks.
private struct ModelStorage: Hashable {
    var word = StorageState.initial
    var inline: ModelHandler?
    var chunks: [UInt: ModelChunk] = [:]
    var nextChunk: UInt = 1
    var runs: [ModelHandler: Int] = [:]
    var drops: [ModelHandler: Int] = [:]
    /// The handlers the fill ran, in order.
    var ranByFill: [ModelHandler] = []
    var wins = 0
    /// Whether the winner was the orphaning: the value slot stays empty.
    var orphaned = false

    /// A handler handed to its runner: run, or dropped if the storage is orphaned.
    mutating func run(_ handler: ModelHandler, byFill: Bool = false) {
        if orphaned {
            drops[handler, default: 0] += 1
            return
        }
        runs[handler, default: 0] += 1
        if byFill { ranByFill.append(handler) }
    }

    /// The chunks from `head`, oldest first.
    func chain(from head: UInt) -> [UInt] {
        var bits = head
        var chain: [UInt] = []
        while bits != 0, let chunk = chunks[bits] {
            chain.append(bits)
            bits = chunk.next
        }
        return chain.reversed()
    }

    /// What the last owner drops from the word `observed` it took: the inline handler if it
    /// was ready, and every handler written into a chunk; the chunks go with it.
    mutating func dropHandlers(_ observed: StorageState) {
        var dropped: [ModelHandler] = []
        if observed.isFirstReady, let first = inline.take() { dropped.append(first) }
        for bits in chain(from: observed.overflowHead) {
            let chunk = chunks.removeValue(forKey: bits)!
            for (index, slot) in chunk.slots.enumerated() where chunk.control.readySlots & (1 << UInt(index)) != 0 {
                if let handler = slot { dropped.append(handler) }
            }
        }
        for handler in dropped { drops[handler, default: 0] += 1 }
    }
}

/// One party of the protocol, as a program counter over its atomic steps.
private enum Party: Hashable {
    case fill(claimed: Bool)
    /// An orphaning: claims like a fill, publishes without a value and drops what it takes.
    case orphan(claimed: Bool)
    /// The winning fill closes the chunks it took, oldest first, one atomic step each.
    case closeChunks([UInt])
    /// A registrant about to add handler `next` of its `count`.
    case observe(registrant: Int, next: Int, count: Int)
    case claimFirst(ModelHandler, count: Int, observed: StorageState, claimed: StorageState)
    case markFirstReady(ModelHandler, count: Int)
    case claimSlot(ModelHandler, count: Int, chunk: UInt, observed: StorageState)
    case markReady(ModelHandler, count: Int, chunk: UInt, slot: Int)
    case pushChunk(ModelHandler, count: Int, slots: Int, observed: StorageState)
    /// The last owner releasing the storage: one atomic update takes the stored handlers.
    case detach
    case done

    /// Takes this party's next atomic step on `storage` and returns what it does next.
    func step(_ storage: inout ModelStorage, _ sizes: ChunkSizes) -> Party {
        switch self {
        case .fill(claimed: false):
            let before = storage.word
            storage.word.rawValue |= StorageState.fillClaimedBit
            guard before.winsFillClaim else {
                return .done
            }
            storage.wins += 1
            return .fill(claimed: true)
        case .orphan(claimed: false):
            let before = storage.word
            storage.word.rawValue |= StorageState.fillClaimedBit
            guard before.winsFillClaim else {
                return .done
            }
            storage.wins += 1
            storage.orphaned = true
            return .fill(claimed: true)
        case .orphan(claimed: true):
            return .fill(claimed: true)
        case .fill(claimed: true):
            let owed = storage.word.publication
            storage.word.rawValue |= StorageState.filledBit
            if owed.runsFirst, let first = storage.inline.take() {
                storage.run(first, byFill: true)
            }
            let chain = storage.chain(from: owed.overflowHead)
            return chain.isEmpty ? .done : .closeChunks(chain)
        case .closeChunks(let chain):
            var chunk = storage.chunks[chain[0]]!
            var ready = chunk.control.readySlots
            chunk.control.rawValue += HandlerChunkState.closedBit
            while ready != 0 {
                let index = ready.trailingZeroBitCount
                ready &= ready - 1
                storage.run(chunk.slots[index].take()!, byFill: true)
            }
            storage.chunks[chain[0]] = chunk
            return chain.count == 1 ? .done : .closeChunks(Array(chain.dropFirst()))
        case .observe(let registrant, let next, let count):
            return Self.register(
                ModelHandler(registrant: registrant, index: next), count, storage.word, &storage, sizes)
        case .claimFirst(let handler, let count, let observed, let claimed):
            guard storage.word == observed else {
                return Self.register(handler, count, storage.word, &storage, sizes)
            }
            storage.word = claimed
            return .markFirstReady(handler, count: count)
        case .markFirstReady(let handler, let count):
            // Writing the slot and the releasing OR: nobody reads the slot before the OR.
            storage.inline = handler
            let before = storage.word
            storage.word.rawValue |= StorageState.firstReadyBit
            if before.firstHandlerRunner == .registrant, let first = storage.inline.take() {
                storage.run(first)
            }
            return Self.next(after: handler, count)
        case .claimSlot(let handler, let count, let bits, let observed):
            var chunk = storage.chunks[bits]!
            let claimed = chunk.control
            chunk.control.rawValue += HandlerChunkState.oneClaim
            storage.chunks[bits] = chunk
            switch claimed.claimOutcome(capacity: chunk.slots.count) {
            case .runNow:
                storage.run(handler)
                return Self.next(after: handler, count)
            case .full:
                let slots = min(2 * chunk.slots.count, sizes.maximum)
                return .pushChunk(handler, count: count, slots: slots, observed: observed)
            case .slot(let index):
                return .markReady(handler, count: count, chunk: bits, slot: index)
            }
        case .markReady(let handler, let count, let bits, let index):
            // Writing the slot and the releasing add: nobody reads the slot before the add.
            var chunk = storage.chunks[bits]!
            chunk.slots[index] = handler
            let before = chunk.control
            chunk.control.rawValue += HandlerChunkState.readyBit(index)
            if before.readyHandlerRunner == .registrant {
                storage.run(chunk.slots[index].take()!)
            }
            storage.chunks[bits] = chunk
            return Self.next(after: handler, count)
        case .pushChunk(let handler, let count, let slots, let observed):
            let bits = storage.nextChunk << 4
            switch observed.overflowPush(bits) {
            case .runNow:
                storage.run(handler)
                return Self.next(after: handler, count)
            case .push(let pushed):
                guard storage.word == observed else {
                    return .pushChunk(handler, count: count, slots: slots, observed: storage.word)
                }
                var chunkSlots = [ModelHandler?](repeating: nil, count: slots)
                chunkSlots[0] = handler
                storage.chunks[bits] = ModelChunk(
                    control: .holdingFirstSlot, slots: chunkSlots, next: observed.overflowHead)
                storage.nextChunk += 1
                storage.word = pushed
                return Self.next(after: handler, count)
            }
        case .detach:
            let observed = storage.word
            guard observed.needsDetach else {
                return .done
            }
            storage.word = observed.detached
            storage.dropHandlers(observed)
            return .done
        case .done:
            return .done
        }
    }

    /// What a registrant does with the word it observed (a load, or a failed exchange).
    static func register(
        _ handler: ModelHandler, _ count: Int, _ observed: StorageState, _ storage: inout ModelStorage,
        _ sizes: ChunkSizes
    ) -> Party {
        switch observed.registration {
        case .runNow:
            storage.run(handler)
            return next(after: handler, count)
        case .claimFirst(let claimed):
            return .claimFirst(handler, count: count, observed: observed, claimed: claimed)
        case .pushOverflow:
            guard observed.overflowHead != 0 else {
                return .pushChunk(handler, count: count, slots: sizes.first, observed: observed)
            }
            return .claimSlot(handler, count: count, chunk: observed.overflowHead, observed: observed)
        }
    }

    /// The registrant's next handler, if it has one left.
    static func next(after handler: ModelHandler, _ count: Int) -> Party {
        handler.index + 1 < count
            ? .observe(registrant: handler.registrant, next: handler.index + 1, count: count) : .done
    }

    var isDone: Bool {
        if case .done = self { true } else { false }
    }
}

/// Runs every interleaving of the parties' steps, depth first, visiting each reachable state
/// once.
private struct ModelSearch {
    let fills: Int
    let registrants: [Int]
    let chunks: ChunkSizes
    let releasedWhileFilling: Bool
    let orphaning: Bool
    /// How many different final states the search reached.
    var endings = 0
    var failures: [String] = []
    private var visited: Set<[AnyHashable]> = []

    /// How many different states the search visited.
    var states: Int { visited.count }

    init(
        fills: Int, registrants: [Int], chunks: ChunkSizes, releasedWhileFilling: Bool = false, orphaning: Bool = false
    ) {
        self.fills = fills
        self.registrants = registrants
        self.chunks = chunks
        self.releasedWhileFilling = releasedWhileFilling
        self.orphaning = orphaning
    }

    var handlers: [ModelHandler] {
        registrants.enumerated().flatMap { registrant, count in
            (0..<count).map { ModelHandler(registrant: registrant, index: $0) }
        }
    }

    mutating func explore() {
        let adding = registrants.enumerated().map { Party.observe(registrant: $0, next: 0, count: $1) }
        guard releasedWhileFilling else {
            let orphaner = orphaning ? [Party.orphan(claimed: false)] : []
            visit(
                ModelStorage(), Array(repeating: Party.fill(claimed: false), count: fills) + orphaner + adding,
                trace: [])
            return
        }
        // The registrants are done (each held the storage while it registered); then the fill
        // and the release race.
        var storage = ModelStorage()
        for var party in adding {
            while !party.isDone {
                party = party.step(&storage, chunks)
            }
        }
        visit(storage, [.fill(claimed: false), .detach], trace: [])
    }

    private mutating func visit(_ storage: ModelStorage, _ parties: [Party], trace: [Int]) {
        guard visited.insert([storage, parties]).inserted else {
            return
        }
        var moved = false
        for index in parties.indices where !parties[index].isDone {
            moved = true
            var next = storage
            var after = parties
            after[index] = parties[index].step(&next, chunks)
            visit(next, after, trace: trace + [index])
        }
        if !moved {
            check(storage, trace: trace)
        }
    }

    private mutating func check(_ storage: ModelStorage, trace: [Int]) {
        endings += 1
        var storage = storage
        let chunkSlotsLeft = storage.chunks.values.contains { $0.slots.contains { $0 != nil } }
        if releasedWhileFilling {
            for handler in handlers where storage.runs[handler, default: 0] + storage.drops[handler, default: 0] != 1 {
                failures.append("\(handler) ran or was dropped other than once, steps \(trace)")
            }
            if storage.inline != nil || chunkSlotsLeft {
                failures.append("a handler was left stored, steps \(trace)")
            }
            return
        }
        if orphaning {
            if storage.wins != 1 { failures.append("\(storage.wins) fills or orphanings won, steps \(trace)") }
            if !storage.word.isFilled || storage.inline != nil || chunkSlotsLeft {
                failures.append("not published, or a handler was left stored, steps \(trace)")
            }
            let (done, other) = storage.orphaned ? (storage.drops, storage.runs) : (storage.runs, storage.drops)
            for handler in handlers where done[handler] != 1 || other[handler] != nil {
                failures.append(
                    "\(handler) ran \(storage.runs[handler] ?? 0) and was dropped \(storage.drops[handler] ?? 0) times"
                        + " (orphaned: \(storage.orphaned)), steps \(trace)")
            }
            return
        }
        if fills == 0 {
            // The last owner releases the storage: every stored handler is dropped, not run.
            guard storage.word.needsDetach else {
                failures.append("nothing to release, steps \(trace)")
                return
            }
            storage.dropHandlers(storage.word)
            storage.word = storage.word.detached
            if storage.drops.keys.sorted(by: precedes) != handlers || storage.drops.values.contains(where: { $0 != 1 })
            {
                failures.append("dropped \(storage.drops), steps \(trace)")
            }
            if storage.word.hasPendingHandlers || !storage.chunks.isEmpty || !storage.runs.isEmpty {
                failures.append("handlers left after detaching, steps \(trace)")
            }
            return
        }
        if storage.wins != 1 { failures.append("\(storage.wins) fills won, steps \(trace)") }
        if !storage.word.isFilled || storage.inline != nil || chunkSlotsLeft {
            failures.append("a handler was left stored after the fill, steps \(trace)")
        }
        for handler in handlers where storage.runs[handler] != 1 {
            failures.append("\(handler) ran \(storage.runs[handler] ?? 0) times, steps \(trace)")
        }
        for registrant in registrants.indices {
            let order = storage.ranByFill.filter { $0.registrant == registrant }.map(\.index)
            if order != order.sorted() {
                failures.append(
                    "the fill ran registrant \(registrant)'s handlers in the order \(order), steps \(trace)")
            }
        }
    }

    private func precedes(_ left: ModelHandler, _ right: ModelHandler) -> Bool {
        (left.registrant, left.index) < (right.registrant, right.index)
    }
}
