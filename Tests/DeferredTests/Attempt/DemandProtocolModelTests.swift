import TestSupport
import Testing

@testable import Deferred

/// Attempt demand, checked over every interleaving without threads.
///
/// The model is a producer's attempt and a stage derived from it that shares its demand (a
/// `map`, say), as ``AttemptNode`` and ``AttemptHub`` build them: the stage holds the path unit
/// it took when it was made. Its consumers take one atomic step at a time on a plain
/// ``DemandState`` (the hub's word), plain ``AttemptFlags`` (the stage's word) and the side
/// units by depth (the hub's side demand, one step under its lock), deciding what to do next
/// with the same transitions the library uses (`takingPath`, `adding`, `releasing`,
/// `returning`, `pinning`, `releasingHeldUnit`, `finishing`, `isPathHeld`):
/// - tasks awaiting `get()`, which take over the path and give up (their task is cancelled), or
///   keep waiting;
/// - a blocking `wait` that times out, giving its unit back;
/// - a handler, which pins the stage;
/// - `cancel()` on the stage;
/// - the producer finishing, and the stage's step starting once it has.
///
/// A search runs every order of their steps and checks, at the end of each:
/// - the producer's cancel handlers run at most once, and never after it finished (guarantee 8);
/// - when the tasks that read the stage gave up and nothing else needs it, they run (guarantees
///   8 and 13); while a handler or a waiting task needs it, they do not;
/// - a step that a consumer needs is never skipped, and one that nobody needs never runs
///   (guarantees 9 and 13), judged whenever no consumer is halfway through a step of its own.
@Suite struct DemandProtocolModelTests {
    static let configurations: [[Consumer]] = [
        [.reader(givesUp: true)],
        [.reader(givesUp: true), .reader(givesUp: true)],
        [.reader(givesUp: true), .reader(givesUp: false)],
        [.reader(givesUp: true), .handler],
        [.handler, .reader(givesUp: true)],
        [.reader(givesUp: true), .waiter],
        [.reader(givesUp: true), .reader(givesUp: true), .waiter],
        [.reader(givesUp: true), .handler, .waiter],
        [.waiter, .handler],
        [.waiter],
        [.handler],
        [],
    ]

    /// Which attempt the consumers read.
    enum Read: String, CaseIterable, CustomTestStringConvertible {
        /// The stage that shares its source's demand.
        case stage
        /// The producer's own attempt, which owns the hub.
        case producer

        var testDescription: String { rawValue }
    }

    @Test(arguments: configurations, Read.allCases)
    func everyInterleavingKeepsTheDemandRules(_ consumers: [Consumer], _ read: Read) {
        for cancels in [false, true] {
            for finishes in [false, true] {
                var search = DemandSearch(
                    consumers: consumers, onProducer: read == .producer, cancels: cancels, finishes: finishes)
                search.explore()
                #expect(
                    search.failures.isEmpty,
                    "cancel: \(cancels), producer finishes: \(finishes); \(search.failures.count) failures, first: \(search.failures.first ?? "")"
                )
                #expect(search.endings > 0)
            }
        }
    }

    @Test func theSearchIsLargeEnoughToMeanSomething() {
        var search = DemandSearch(
            consumers: [.reader(givesUp: true), .reader(givesUp: true), .handler, .waiter], onProducer: false,
            cancels: true, finishes: true)
        search.explore()
        #expect(search.failures.isEmpty, "first: \(search.failures.first ?? "")")
        #expect(search.states > 10_000, "explored \(search.states) states, \(search.endings) of them final")
        progress(
            "demand model: \(search.states) states, \(search.endings) final, for 2 readers, a handler, a waiter, cancel() and the producer"
        )
    }
}

/// Who consumes the stage in the model.
enum Consumer: Hashable, Sendable, CustomTestStringConvertible {
    /// A task awaiting `get()`; its task is cancelled if `givesUp`, else it keeps waiting.
    case reader(givesUp: Bool)
    /// A blocking `wait(until:)` that times out.
    case waiter
    /// A handler added with `upon`, `uponSuccess` or `uponFailure`.
    case handler

    var testDescription: String {
        switch self {
        case .reader(let givesUp): givesUp ? "reader that gives up" : "reader that waits"
        case .waiter: "waiter"
        case .handler: "handler"
        }
    }
}

/// The shared memory of the model, and what happened.
private struct DemandMemory: Hashable {
    /// The hub's word: the stage holds the path unit it took when it was made.
    var hub = DemandState.initial.adding(path: true)!
    /// Whether the consumers read the producer's attempt itself, whose hub has no stage.
    var onProducer = false
    /// The stage's word, at depth 1 on its source's path.
    var flags = AttemptFlags(rawValue: AttemptFlags.holdsUnit | AttemptFlags.depth(1))
    /// The side units, by depth.
    var sides: [Int: Int] = [:]
    /// Whether the stage is decided, by `cancel()` or by its step.
    var stageDecided = false
    /// Whether the producer finished (its hub settled).
    var producerFinished = false
    /// How often the producer's cancel handlers ran.
    var cancelHandlerRuns = 0
    /// Whether the step ran, or was skipped as not needed.
    var stepRan = false
    var stepSkipped = false
    /// The consumers that hold a unit and need the stage now: ground truth.
    var needing: Set<Int> = []
    /// Whether a handler has pinned the stage: ground truth.
    var pinned = false
    /// Whether that handler's pin holds: it kept the stage's own unit, or took a side unit.
    var pinHolds = false
    /// What a check found wrong while the steps ran.
    var violation: String?

    /// Whether a side unit at `depth` or deeper is held; what the hub's side demand answers.
    func holdsSide(atLeast depth: Int) -> Bool {
        sides.contains { $0.key >= depth && $0.value > 0 }
    }

    /// Releases a unit at `depth` (see ``DemandUnit``) on the hub word; the side count is the
    /// releaser's next step.
    mutating func releaseUnit(depth: Int, returning: Bool) {
        let (next, cancels) = returning ? hub.returning() : hub.releasing(path: depth == DemandUnit.path)
        if next != hub && cancels {
            cancelHandlerRuns += 1
            // Once the stage is decided (cancelled), its consumers need nothing above it.
            if !stageDecided && (!needing.isEmpty || pinHolds) {
                violation = "the work was stopped while \(needing) needed it (pinned: \(pinHolds))"
            }
        }
        hub = next
    }
}

/// One party's next atomic step.
private enum Step: Hashable {
    /// A consumer (index `id`) starts: a reader continues the path, a waiter takes a side unit.
    case register(id: Int, Consumer)
    /// A conversion: counting the stage's kept unit as a side unit, then publishing the
    /// conversion if the stage's flags are still `observed`, else taking the count back.
    case convertCount(id: Int, Consumer, observed: AttemptFlags, depth: Int)
    case convertPublish(id: Int, Consumer, observed: AttemptFlags, depth: Int)
    case convertUncount(id: Int, Consumer, depth: Int)
    /// Counting a side unit at `depth` before taking it on the hub word.
    case countSide(id: Int, Consumer, depth: Int, converting: Bool)
    /// Taking a unit on the hub word (the path unit if `path`).
    case takeUnit(id: Int, Consumer, path: Bool, side: Int?)
    /// Giving a side count back after the hub refused the unit (cancelled already).
    case uncountSide(id: Int, depth: Int)
    /// Holding a unit (path or side at `depth`), until the consumer leaves.
    case holding(id: Int, Consumer, depth: Int)
    /// Giving the side count at `depth` back after the unit was released.
    case releaseSide(depth: Int)
    /// A handler's pin: then a side unit if the stage handed its own over.
    case pin(id: Int)
    case pinCountSide(id: Int)
    case pinTake(id: Int)
    case pinMark(id: Int)
    /// `cancel()` on the stage.
    case cancel
    case cancelRelease
    /// The stage releases the unit it holds (after `cancel()`, or once its step decided it).
    case stageReleases
    /// The producer finishes.
    case finish
    /// The stage's step, once the producer finished: reads the hub word, then the side units.
    case stepStart
    case stepReadSides
    case done

    var isDone: Bool { self == .done }

    /// Whether the party is halfway through registering or releasing, when what it needs is in
    /// flux.
    var isInFlux: Bool {
        switch self {
        case .register, .holding, .pin, .cancel, .finish, .stepStart, .done: false
        default: true
        }
    }

    func step(_ memory: inout DemandMemory) -> Step {
        switch self {
        case .register(let id, let consumer):
            if memory.stageDecided {
                return .done  // `get()` and `wait` read the result without taking a unit.
            }
            if memory.onProducer {
                return .takeUnit(id: id, consumer, path: false, side: nil)
            }
            if consumer == .waiter {
                return .countSide(id: id, consumer, depth: 1, converting: false)
            }
            guard let (next, taking) = memory.flags.takingPath() else {
                return .countSide(id: id, consumer, depth: 1, converting: false)
            }
            if case .converting(let depth) = taking {
                // Counted before the conversion is published (`takePath(countingSidesOn:)`).
                return .convertCount(id: id, consumer, observed: memory.flags, depth: depth)
            }
            memory.flags = next
            switch taking {
            case .handedOver:
                memory.needing.insert(id)
                return .holding(id: id, consumer, depth: DemandUnit.path)
            case .converting(let depth):
                return .countSide(id: id, consumer, depth: depth, converting: true)
            case .fresh:
                return .takeUnit(id: id, consumer, path: true, side: nil)
            case .alreadyTaken:
                return .countSide(id: id, consumer, depth: 1, converting: false)
            }
        case .convertCount(let id, let consumer, let observed, let depth):
            memory.sides[depth, default: 0] += 1
            return .convertPublish(id: id, consumer, observed: observed, depth: depth)
        case .convertPublish(let id, let consumer, let observed, let depth):
            guard memory.flags == observed, let (next, _) = observed.takingPath() else {
                return .convertUncount(id: id, consumer, depth: depth)
            }
            memory.flags = next
            return .takeUnit(id: id, consumer, path: false, side: nil)
        case .convertUncount(let id, let consumer, let depth):
            memory.sides[depth, default: 0] -= 1
            return .register(id: id, consumer)
        case .countSide(let id, let consumer, let depth, let converting):
            memory.sides[depth, default: 0] += 1
            // Converting: the stage's own unit becomes a side unit; the consumer takes the path.
            return converting
                ? .takeUnit(id: id, consumer, path: false, side: nil)
                : .takeUnit(id: id, consumer, path: false, side: depth)
        case .takeUnit(let id, let consumer, let path, let side):
            guard let next = memory.hub.adding(path: path) else {
                return side.map { .uncountSide(id: id, depth: $0) } ?? .done
            }
            memory.hub = next
            memory.needing.insert(id)
            // A converted unit is counted as the path unit (`takePath(keptAt:)`); on the
            // producer's own hub, a unit needs only the producer.
            let depth = memory.onProducer ? 0 : side ?? DemandUnit.path
            return .holding(id: id, consumer, depth: depth)
        case .uncountSide(_, let depth):
            memory.sides[depth, default: 0] -= 1
            return .done
        case .holding(let id, let consumer, let depth):
            switch consumer {
            case .reader(givesUp: false):
                return .done  // Keeps waiting: needs the stage for good in this model.
            case .reader(givesUp: true), .waiter:
                memory.needing.remove(id)
                memory.releaseUnit(depth: depth, returning: consumer == .waiter)
                return isSide(depth) ? .releaseSide(depth: depth) : .done
            case .handler:
                return .done
            }
        case .releaseSide(let depth):
            memory.sides[depth, default: 0] -= 1
            return .done
        case .pin(let id):
            if memory.onProducer {
                memory.pinHolds = !memory.hub.isFinal
                memory.pinned = true
                memory.hub = memory.hub.pinning()
                return .done
            }
            let (next, takesSide) = memory.flags.pinning()
            // Keeping the unit the stage still holds is the pin's effect at once.
            memory.pinHolds = !takesSide && memory.flags.has(AttemptFlags.holdsUnit)
            memory.flags = next
            memory.pinned = true
            return takesSide ? .pinCountSide(id: id) : .done
        case .pinCountSide(let id):
            memory.sides[1, default: 0] += 1
            return .pinTake(id: id)
        case .pinTake(let id):
            guard let next = memory.hub.adding() else {
                return .uncountSide(id: id, depth: 1)
            }
            memory.hub = next
            return .pinMark(id: id)
        case .pinMark:
            memory.flags = memory.flags.holdingPinnedUnit()
            memory.pinHolds = true
            // Decided meanwhile: the pin's unit is released like the stage's own.
            return memory.stageDecided ? .stageReleases : .done
        case .cancel:
            guard !memory.stageDecided else {
                return .done  // A late cancel only withdraws callbacks.
            }
            memory.stageDecided = true
            if memory.onProducer {
                let (next, finishes) = memory.hub.finishing(cancelled: true)
                if finishes {
                    memory.hub = next
                    memory.cancelHandlerRuns += 1
                }
                return .done
            }
            return .cancelRelease
        case .cancelRelease, .stageReleases:
            let (next, released) = memory.flags.releasingHeldUnit()
            memory.flags = next
            guard let depth = released else {
                return .done
            }
            memory.releaseUnit(depth: depth, returning: false)
            return isSide(depth) ? .releaseSide(depth: depth) : .done
        case .finish:
            let (next, finishes) = memory.hub.finishing(cancelled: false)
            if finishes {
                memory.hub = next
                memory.producerFinished = true
            }
            return .done
        case .stepStart:
            if memory.stageDecided || memory.hub.isCancelled {
                return .done  // Cancelled: by `cancel()`, or with its source.
            }
            guard memory.producerFinished else {
                return .stepStart  // Not enabled yet; see ``DemandSearch/isEnabled``.
            }
            if memory.hub.isPathHeld {
                return decideStep(needed: true, &memory)
            }
            return .stepReadSides
        case .stepReadSides:
            if memory.stageDecided {
                return .done
            }
            return decideStep(needed: memory.holdsSide(atLeast: 1), &memory)
        case .done:
            return .done
        }
    }

    /// Whether a unit at `depth` is a side unit (see ``DemandUnit``).
    private func isSide(_ depth: Int) -> Bool {
        depth > 0 && depth != DemandUnit.path
    }

    /// The step runs if `needed`, or the stage is decided as cancelled; either way it then
    /// releases the unit it holds.
    private func decideStep(needed: Bool, _ memory: inout DemandMemory) -> Step {
        memory.stageDecided = true
        if needed {
            memory.stepRan = true
        } else {
            memory.stepSkipped = true
        }
        return .stageReleases
    }
}

/// Runs every interleaving of the parties' steps from the initial memory.
private struct DemandSearch {
    let consumers: [Consumer]
    let onProducer: Bool
    let cancels: Bool
    let finishes: Bool
    var endings = 0
    var failures: [String] = []
    private var visited: Set<[AnyHashable]> = []

    var states: Int { visited.count }

    init(consumers: [Consumer], onProducer: Bool, cancels: Bool, finishes: Bool) {
        self.consumers = consumers
        self.onProducer = onProducer
        self.cancels = cancels
        self.finishes = finishes
    }

    mutating func explore() {
        var parties: [Step] = consumers.enumerated().map { id, consumer in
            consumer == .handler ? .pin(id: id) : .register(id: id, consumer)
        }
        if cancels { parties.append(.cancel) }
        if finishes { parties += onProducer ? [.finish] : [.finish, .stepStart] }
        var memory = DemandMemory()
        if onProducer {
            memory.onProducer = true
            memory.hub = .initial
            memory.flags = AttemptFlags(rawValue: 0)
        }
        visit(memory, parties, trace: [])
    }

    /// Whether `party` can take a step now: the step starts only once the producer finished or
    /// the stage was cancelled.
    private static func isEnabled(_ party: Step, _ memory: DemandMemory) -> Bool {
        if party == .stepStart {
            return memory.producerFinished || memory.stageDecided || memory.hub.isCancelled
        }
        return !party.isDone
    }

    private mutating func visit(_ memory: DemandMemory, _ parties: [Step], trace: [Int]) {
        guard failures.count < 5, visited.insert([memory, parties]).inserted else {
            return
        }
        var moved = false
        for index in parties.indices where Self.isEnabled(parties[index], memory) {
            moved = true
            var next = memory
            var after = parties
            after[index] = parties[index].step(&next)
            if next.sides.values.contains(where: { $0 < 0 }) && next.violation == nil {
                next.violation = "a side count went below zero: \(next.sides)"
            }
            if parties[index] == .stepStart || parties[index] == .stepReadSides {
                var others = parties
                others.remove(at: index)
                checkStep(before: memory, after: next, others: others, trace: trace + [index])
            }
            visit(next, after, trace: trace + [index])
        }
        if !moved {
            check(memory, parties, trace: trace)
        }
    }

    /// The step's decision, if it made one now, against what the consumers need: judged only
    /// when no other party is halfway through a step of its own.
    private mutating func checkStep(before: DemandMemory, after: DemandMemory, others: [Step], trace: [Int]) {
        guard !before.stageDecided, after.stageDecided, after.stepRan || after.stepSkipped,
            !others.contains(where: \.isInFlux)
        else {
            return
        }
        let ownUnit = before.flags.has(AttemptFlags.holdsUnit) && !before.flags.has(AttemptFlags.pathTaken)
        let needed = !before.needing.isEmpty || before.pinHolds || ownUnit
        if after.stepSkipped && needed {
            failures.append(
                "the step was skipped though \(before.needing) needed it (pinned: \(before.pinHolds)), steps \(trace)")
        }
        if after.stepRan && !needed {
            failures.append("the step ran though nothing needed it, steps \(trace)")
        }
    }

    private mutating func check(_ memory: DemandMemory, _ parties: [Step], trace: [Int]) {
        endings += 1
        let trace = "consumers \(consumers) of the \(onProducer ? "producer" : "stage"), steps \(trace)"
        if memory.cancelHandlerRuns > 1 {
            failures.append("the cancel handlers ran \(memory.cancelHandlerRuns) times, \(trace)")
        }
        if memory.producerFinished && memory.cancelHandlerRuns > 0 {
            failures.append("the cancel handlers ran after the producer finished, \(trace)")
        }
        if memory.sides.values.contains(where: { $0 != 0 }) && memory.needing.isEmpty && !memory.pinned {
            failures.append("side units left with nobody holding them: \(memory.sides), \(trace)")
        }
        if let violation = memory.violation {
            failures.append("\(violation), \(trace)")
        }
        // Every consumer that took a unit gave up, and something gave the stage up (a reader
        // that gave up, or `cancel()`): nothing needs the work any more.
        let gaveUp = consumers.contains(.reader(givesUp: true)) || cancels
        let holdsForGood = consumers.contains(.handler) || consumers.contains(.reader(givesUp: false))
        if !gaveUp && memory.cancelHandlerRuns > 0 {
            failures.append("the work was stopped though nobody gave it up (a wait that timed out?), \(trace)")
        }
        if gaveUp && !holdsForGood && !memory.producerFinished && memory.cancelHandlerRuns != 1 {
            failures.append(
                "nothing needs the work, but the producer was not told to stop (hub \(memory.hub.rawValue)), \(trace)")
        }
    }
}
