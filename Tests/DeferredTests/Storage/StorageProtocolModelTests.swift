import Testing

@testable import Deferred

/// The storage's lock-free protocol, checked over every interleaving without threads.
///
/// Fills and registrants each take one atomic step at a time on a plain ``StorageState`` and
/// decide what to do next with the same transitions the storage uses (``StorageState``'s
/// `registration`, `winsFillClaim`, `firstHandlerRunner`, `overflowPush`, `publication`,
/// `needsDetach`, `detached`). A search runs every order of their steps and checks guarantees
/// 1 and 2 at the end of each: one fill wins, and every handler runs exactly once, or, if the
/// storage is released unfilled, is dropped exactly once.
@Suite struct StorageProtocolModelTests {
    @Test(arguments: [(1, 1), (1, 2), (1, 3), (2, 2), (3, 2)])
    func everyInterleavingOfFillsAndRegistrationsRunsEachHandlerOnce(_ fills: Int, _ registrants: Int) {
        var search = ModelSearch(fills: fills, registrants: registrants)
        search.explore()
        let (failures, first) = (search.failures.count, search.failures.first ?? "")
        #expect(failures == 0, "first: \(first)")
        #expect(search.interleavings > 1, "explored \(search.interleavings) interleavings")
    }

    /// A storage's last owner releases it while a weak reference (an attempt's pending time
    /// limit) fills it: each stored handler is run by the fill or dropped by the release, once.
    @Test(arguments: [1, 2, 3])
    func aFillRacingTheReleaseOfTheStorageRunsOrDropsEachHandlerOnce(_ registrants: Int) {
        var search = ModelSearch(fills: 1, registrants: registrants, releasedWhileFilling: true)
        search.explore()
        let (failures, first) = (search.failures.count, search.failures.first ?? "")
        #expect(failures == 0, "first: \(first)")
        #expect(search.interleavings > 1)
    }

    @Test(arguments: [2, 3, 4])
    func anUnfilledStorageReleasedAfterAnyRegistrationsDropsEachHandlerOnce(_ registrants: Int) {
        var search = ModelSearch(fills: 0, registrants: registrants)
        search.explore()
        let (failures, first) = (search.failures.count, search.failures.first ?? "")
        #expect(failures == 0, "first: \(first)")
        #expect(search.interleavings > 1)
    }
}

/// The shared memory of the model: the state word, the inline slot and the overflow nodes.
private struct ModelStorage {
    var word = StorageState.initial
    var inline: Int?
    var nodes: [UInt: (handler: Int, next: UInt)] = [:]
    var runs: [Int: Int] = [:]
    var drops: [Int: Int] = [:]
    var wins = 0

    mutating func run(_ handler: Int) {
        runs[handler, default: 0] += 1
    }

    /// The handlers of the overflow stack from `head`, oldest first, removing their nodes.
    mutating func takeOverflow(_ head: UInt) -> [Int] {
        var handlers: [Int] = []
        var bits = head
        while bits != 0, let node = nodes.removeValue(forKey: bits) {
            handlers.append(node.handler)
            bits = node.next
        }
        return handlers.reversed()
    }
}

/// One party of the protocol, as a program counter over its atomic steps.
private enum Party {
    case fill(claimed: Bool)
    case observe(handler: Int)
    case claimFirst(handler: Int, observed: StorageState, claimed: StorageState)
    case markFirstReady(handler: Int)
    case push(handler: Int, observed: StorageState)
    /// The last owner releasing the storage: one atomic update takes the stored handlers.
    case detach
    case done

    /// Takes this party's next atomic step on `storage` and returns what it does next.
    func step(_ storage: inout ModelStorage) -> Party {
        switch self {
        case .fill(claimed: false):
            let before = storage.word
            storage.word.rawValue |= StorageState.fillClaimedBit
            guard before.winsFillClaim else {
                return .done
            }
            storage.wins += 1
            return .fill(claimed: true)
        case .fill(claimed: true):
            let owed = storage.word.publication
            storage.word = .published
            if owed.runsFirst, let first = storage.inline.take() {
                storage.run(first)
            }
            for handler in storage.takeOverflow(owed.overflowHead) {
                storage.run(handler)
            }
            return .done
        case .observe(let handler):
            return Self.register(handler, observed: storage.word, &storage)
        case .claimFirst(let handler, let observed, let claimed):
            guard storage.word == observed else {
                return Self.register(handler, observed: storage.word, &storage)
            }
            storage.word = claimed
            return .markFirstReady(handler: handler)
        case .markFirstReady(let handler):
            // Writing the slot and the releasing OR: nobody reads the slot before the OR.
            storage.inline = handler
            let before = storage.word
            storage.word.rawValue |= StorageState.firstReadyBit
            if before.firstHandlerRunner == .registrant, let first = storage.inline.take() {
                storage.run(first)
            }
            return .done
        case .push(let handler, let observed):
            let bits = UInt(handler + 1) << 4
            switch observed.overflowPush(bits) {
            case .runNow:
                storage.run(handler)
                return .done
            case .push(let pushed):
                guard storage.word == observed else {
                    return .push(handler: handler, observed: storage.word)
                }
                storage.nodes[bits] = (handler, observed.overflowHead)
                storage.word = pushed
                return .done
            }
        case .detach:
            let observed = storage.word
            guard observed.needsDetach else {
                return .done
            }
            storage.word = observed.detached
            var dropped = storage.takeOverflow(observed.overflowHead)
            if observed.isFirstReady, let first = storage.inline.take() {
                dropped.append(first)
            }
            for handler in dropped {
                storage.drops[handler, default: 0] += 1
            }
            return .done
        case .done:
            return .done
        }
    }

    /// What a registrant does with the word it observed (a load, or a failed exchange).
    static func register(_ handler: Int, observed: StorageState, _ storage: inout ModelStorage) -> Party {
        switch observed.registration {
        case .runNow:
            storage.run(handler)
            return .done
        case .claimFirst(let claimed):
            return .claimFirst(handler: handler, observed: observed, claimed: claimed)
        case .pushOverflow:
            return .push(handler: handler, observed: observed)
        }
    }

    var isDone: Bool {
        if case .done = self { true } else { false }
    }
}

/// Runs every interleaving of the parties' steps, depth first.
private struct ModelSearch {
    let fills: Int
    let registrants: Int
    let releasedWhileFilling: Bool
    var interleavings = 0
    var failures: [String] = []

    init(fills: Int, registrants: Int, releasedWhileFilling: Bool = false) {
        self.fills = fills
        self.registrants = registrants
        self.releasedWhileFilling = releasedWhileFilling
    }

    mutating func explore() {
        guard releasedWhileFilling else {
            let parties =
                Array(repeating: Party.fill(claimed: false), count: fills)
                + (0..<registrants).map { Party.observe(handler: $0) }
            visit(ModelStorage(), parties, trace: [])
            return
        }
        // The registrants are done (each held the storage while it registered); then the fill
        // and the release race.
        var storage = ModelStorage()
        for handler in 0..<registrants {
            var party = Party.observe(handler: handler)
            while !party.isDone {
                party = party.step(&storage)
            }
        }
        visit(storage, [.fill(claimed: false), .detach], trace: [])
    }

    private mutating func visit(_ storage: ModelStorage, _ parties: [Party], trace: [Int]) {
        var moved = false
        for index in parties.indices where !parties[index].isDone {
            moved = true
            var next = storage
            var after = parties
            after[index] = parties[index].step(&next)
            visit(next, after, trace: trace + [index])
        }
        if !moved {
            check(storage, trace: trace)
        }
    }

    private mutating func check(_ storage: ModelStorage, trace: [Int]) {
        interleavings += 1
        var storage = storage
        if releasedWhileFilling {
            for handler in 0..<registrants
            where storage.runs[handler, default: 0] + storage.drops[handler, default: 0] != 1 {
                failures.append("handler \(handler) ran or was dropped other than once, steps \(trace)")
            }
            if storage.inline != nil || !storage.nodes.isEmpty {
                failures.append("a handler was left stored, steps \(trace)")
            }
            return
        }
        if fills > 0 {
            if storage.wins != 1 { failures.append("\(storage.wins) fills won, steps \(trace)") }
            if !storage.word.isFilled || storage.inline != nil || !storage.nodes.isEmpty {
                failures.append("a handler was left stored after the fill, steps \(trace)")
            }
        } else if storage.word.needsDetach {
            // The last owner releases the storage: every stored handler is dropped, not run.
            var dropped = storage.takeOverflow(storage.word.overflowHead)
            if let first = storage.inline.take() { dropped.append(first) }
            storage.word = storage.word.detached
            if Set(dropped).count != registrants || dropped.count != registrants {
                failures.append("dropped \(dropped), steps \(trace)")
            }
            if storage.word.hasPendingHandlers { failures.append("handlers left after detaching, steps \(trace)") }
            return
        }
        for handler in 0..<registrants where storage.runs[handler] != (fills > 0 ? 1 : nil) {
            failures.append("handler \(handler) ran \(storage.runs[handler] ?? 0) times, steps \(trace)")
        }
    }
}
