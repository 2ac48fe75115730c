import TestSupport
import Testing

@testable import Deferred

/// The deadline ledger's handshake with an attempt's owner, checked over every interleaving
/// without threads.
///
/// The ledger reads a tracked attempt's source out of its slot under its lock, and retains it to
/// count the attempt's deadline there. That is safe only if the attempt's owner cannot release
/// the source between the ledger's read and its retain, nor leave the ledger counting on a
/// source it no longer holds. The model is one attempt whose slot holds a first source, an owner
/// that may switch it to a second (what `hold(taken:)` does as an `andThen` moves on) and then
/// ends the attempt's demand (settles it, takes the slot, what `endDemand` does), and one or two
/// ledger sessions (a `track`, a walk up from a consumer). Each takes one atomic step at a time
/// on a plain ``DemandState`` word (with the library's `settling` and the *tracked* bit), the
/// slot and the lock; a session's mark is a read-modify-write of the word, as `markTracked()`
/// is. A search runs every order of their steps and checks at the end of each:
/// - the ledger never retains a source after it was freed;
/// - the owner never releases a source the ledger still counts on;
/// - no record is left once the demand ended, and every source is freed exactly once.
///
/// Two broken orders (the owner checking the bit before it takes from the slot; the ledger
/// reading the slot before it marks) must fail, so the search can tell.
@Suite struct DeadlineHandshakeModelTests {
    @Test(arguments: [1, 2], [false, true])
    func everyInterleavingKeepsTheLedgerAndTheOwnerApart(_ sessions: Int, _ switches: Bool) {
        var search = HandshakeSearch(sessions: sessions, ownerSwitches: switches, order: .library)
        search.explore()
        #expect(search.failures.isEmpty, "\(search.failures.count) failures, first: \(search.failures.first ?? "")")
        #expect(search.states > 40, "explored \(search.states) states, \(search.endings) of them final")
        progress(
            "deadline handshake model, sessions: \(sessions), owner switches: \(switches): \(search.states) states")
    }

    @Test(arguments: [HandshakeOrder.ownerChecksFirst, .ledgerReadsFirst])
    func aBrokenOrderIsCaught(_ order: HandshakeOrder) {
        var search = HandshakeSearch(sessions: 1, ownerSwitches: true, order: order)
        search.explore()
        #expect(!search.failures.isEmpty, "the search found nothing wrong with \(order)")
        progress("deadline handshake model, \(order): \(search.failures.first ?? "nothing found")")
    }
}

/// The order in which the parties take their steps: the library's, or a broken one.
enum HandshakeOrder: Hashable, Sendable {
    case library
    /// The owner reads the tracked bit before it takes the source out of the slot.
    case ownerChecksFirst
    /// The ledger reads the slot before it marks the attempt tracked.
    case ledgerReadsFirst
}

/// A source the attempt holds: the first, or the one an owner switches to.
private enum Source: Hashable {
    case first
    case second
}

/// The shared memory of the model.
private struct HandshakeMemory: Hashable {
    var word = DemandState.initial
    var slot: Source? = .first
    /// Who holds the ledger's lock: the index of a party.
    var lockHolder: Int?
    /// References to each source: the first is in the slot, the second in the owner's hand.
    var references: [Source: Int] = [.first: 1, .second: 1]
    var frees: [Source: Int] = [:]
    /// The attempt's record in the ledger, and the source it counts on.
    var hasRecord = false
    var countedOn: Source?
    var violation: String?

    mutating func fail(_ message: String) {
        if violation == nil {
            violation = message
        }
    }

    mutating func release(_ source: Source?) {
        guard let source else {
            return
        }
        if frees[source, default: 0] > 0 {
            fail("\(source) released after it was freed")
        }
        references[source, default: 0] -= 1
        if references[source] == 0 {
            frees[source, default: 0] += 1
        }
    }

    /// The ledger retains `source` to count on it, dropping what it counted on before.
    mutating func countOn(_ source: Source?) -> Source? {
        if let source {
            if frees[source, default: 0] > 0 {
                fail("the ledger retained \(source) after it was freed")
            }
            references[source, default: 0] += 1
        }
        let dropped = countedOn
        countedOn = source
        return dropped
    }

    var isTracked: Bool { word.has(DemandState.tracked) }
}

/// One party's next atomic step.
private enum HandshakeStep: Hashable {
    // A ledger session.
    case sessionLock
    case sessionMark(readBefore: Source??)
    case sessionLoadWord(readBefore: Source??)
    case sessionLoadSlot
    case sessionRetain(Source?)
    case sessionUnlock(garbage: Source?)
    case sessionDrop(Source?)
    // The owner switching its source.
    case ownerCheckFirst(switching: Bool)
    case ownerExchange(sawTracked: Bool?)
    case ownerCheckAfterExchange(previous: Source?)
    case ownerLockToReconcile(previous: Source?)
    case ownerReconcile(previous: Source?)
    case ownerUnlockAfterReconcile(garbage: Source?, previous: Source?)
    case ownerReleasePrevious(Source?)
    // The owner ending the attempt's demand.
    case ownerSettle
    case ownerTake(sawTracked: Bool?)
    case ownerCheckAfterTake(held: Source?)
    case ownerLockToLeave(held: Source?)
    case ownerLeave(held: Source?)
    case ownerUnlockAfterLeave(garbage: Source?, held: Source?)
    case ownerReleaseHeld(Source?)
    case done

    /// Whether the step can run now: taking the lock waits for it.
    func isEnabled(_ memory: HandshakeMemory) -> Bool {
        switch self {
        case .sessionLock, .ownerLockToReconcile, .ownerLockToLeave: memory.lockHolder == nil
        case .done: false
        default: true
        }
    }

    func step(_ memory: inout HandshakeMemory, party: Int, order: HandshakeOrder) -> HandshakeStep {
        switch self {
        case .sessionLock:
            memory.lockHolder = party
            return order == .ledgerReadsFirst ? .sessionLoadSlot : .sessionMark(readBefore: nil)
        case .sessionMark(let readBefore):
            let before = memory.word
            memory.word = DemandState(rawValue: before.rawValue | DemandState.tracked)
            if before.isFinal && !memory.hasRecord {
                return .sessionUnlock(garbage: nil)  // Its demand ended: it needs no record.
            }
            memory.hasRecord = true
            return .sessionLoadWord(readBefore: readBefore)
        case .sessionLoadWord(let readBefore):
            guard !memory.word.isFinal else {
                return .sessionUnlock(garbage: nil)  // Its end of demand withdraws what it counted.
            }
            if let readBefore {
                return .sessionRetain(readBefore)
            }
            return .sessionLoadSlot
        case .sessionLoadSlot:
            if order == .ledgerReadsFirst && !memory.isTracked {
                return .sessionMark(readBefore: .some(memory.slot))
            }
            return .sessionRetain(memory.slot)
        case .sessionRetain(let source):
            return .sessionUnlock(garbage: memory.countOn(source))
        case .sessionUnlock(let garbage):
            memory.lockHolder = nil
            return .sessionDrop(garbage)
        case .sessionDrop(let garbage):
            memory.release(garbage)
            return .done

        case .ownerCheckFirst(let switching):
            let tracked = memory.isTracked
            return switching ? .ownerExchange(sawTracked: tracked) : .ownerTake(sawTracked: tracked)
        case .ownerExchange(let sawTracked):
            let previous = memory.slot
            memory.slot = .second
            if let sawTracked {
                return sawTracked ? .ownerLockToReconcile(previous: previous) : .ownerReleasePrevious(previous)
            }
            return .ownerCheckAfterExchange(previous: previous)
        case .ownerCheckAfterExchange(let previous):
            return memory.isTracked ? .ownerLockToReconcile(previous: previous) : .ownerReleasePrevious(previous)
        case .ownerLockToReconcile(let previous):
            memory.lockHolder = party
            return .ownerReconcile(previous: previous)
        case .ownerReconcile(let previous):
            // Under the lock: what a session does for a marked attempt whose demand has not ended.
            let garbage = memory.hasRecord ? memory.countOn(memory.slot) : nil
            return .ownerUnlockAfterReconcile(garbage: garbage, previous: previous)
        case .ownerUnlockAfterReconcile(let garbage, let previous):
            memory.lockHolder = nil
            memory.release(garbage)
            return .ownerReleasePrevious(previous)
        case .ownerReleasePrevious(let previous):
            if let previous, memory.countedOn == previous {
                memory.fail("the owner released \(previous) while the ledger counted on it")
            }
            memory.release(previous)
            return .ownerSettle

        case .ownerSettle:
            memory.word = memory.word.settling(cancelled: false).next
            return order == .ownerChecksFirst ? .ownerCheckFirst(switching: false) : .ownerTake(sawTracked: nil)
        case .ownerTake(let sawTracked):
            let held = memory.slot
            memory.slot = nil
            if let sawTracked {
                return sawTracked ? .ownerLockToLeave(held: held) : .ownerReleaseHeld(held)
            }
            return .ownerCheckAfterTake(held: held)
        case .ownerCheckAfterTake(let held):
            return memory.isTracked ? .ownerLockToLeave(held: held) : .ownerReleaseHeld(held)
        case .ownerLockToLeave(let held):
            memory.lockHolder = party
            return .ownerLeave(held: held)
        case .ownerLeave(let held):
            let garbage = memory.hasRecord ? memory.countOn(nil) : nil
            memory.hasRecord = false
            return .ownerUnlockAfterLeave(garbage: garbage, held: held)
        case .ownerUnlockAfterLeave(let garbage, let held):
            memory.lockHolder = nil
            memory.release(garbage)
            return .ownerReleaseHeld(held)
        case .ownerReleaseHeld(let held):
            if let held, memory.countedOn == held {
                memory.fail("the owner released \(held) while the ledger counted on it")
            }
            memory.release(held)
            return .done

        case .done:
            return .done
        }
    }
}

/// Runs every interleaving of the parties' steps from the initial memory.
private struct HandshakeSearch {
    let sessions: Int
    let ownerSwitches: Bool
    let order: HandshakeOrder
    var endings = 0
    var failures: [String] = []
    private var visited: Set<[AnyHashable]> = []

    var states: Int { visited.count }

    init(sessions: Int, ownerSwitches: Bool, order: HandshakeOrder) {
        self.sessions = sessions
        self.ownerSwitches = ownerSwitches
        self.order = order
    }

    mutating func explore() {
        var memory = HandshakeMemory()
        let owner: HandshakeStep
        if ownerSwitches {
            owner = order == .ownerChecksFirst ? .ownerCheckFirst(switching: true) : .ownerExchange(sawTracked: nil)
        } else {
            memory.release(.second)  // Never used.
            owner = .ownerSettle
        }
        visit(memory, [owner] + Array(repeating: .sessionLock, count: sessions), trace: [])
    }

    private mutating func visit(_ memory: HandshakeMemory, _ parties: [HandshakeStep], trace: [Int]) {
        guard failures.count < 5, visited.insert([memory, parties]).inserted else {
            return
        }
        var moved = false
        for index in parties.indices where parties[index].isEnabled(memory) {
            moved = true
            var next = memory
            var after = parties
            after[index] = parties[index].step(&next, party: index, order: order)
            visit(next, after, trace: trace + [index])
        }
        if !moved {
            check(memory, parties, trace: trace)
        }
    }

    private mutating func check(_ memory: HandshakeMemory, _ parties: [HandshakeStep], trace: [Int]) {
        endings += 1
        let trace = "sessions: \(sessions), owner switches: \(ownerSwitches), steps \(trace)"
        if let violation = memory.violation {
            failures.append("\(violation), \(trace)")
        }
        if parties.contains(where: { $0 != .done }) {
            failures.append("a party waits for the lock forever, \(trace)")
        }
        if memory.hasRecord || memory.countedOn != nil {
            failures.append("a record is left after the attempt's demand ended, \(trace)")
        }
        for source in [Source.first, .second] where memory.frees[source, default: 0] != 1 {
            failures.append("\(source) was freed \(memory.frees[source, default: 0]) times, \(trace)")
        }
    }
}
