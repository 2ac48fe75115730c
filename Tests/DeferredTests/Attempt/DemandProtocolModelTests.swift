import TestSupport
import Testing

@testable import Deferred

/// Attempt demand, checked over every interleaving without threads.
///
/// The model is a producer's attempt and a stage derived from it (a `map`, say), as
/// ``AttemptNode`` builds them: the stage holds a unit of the producer's demand in its
/// `upstream` from the start. Each party takes one atomic step at a time on plain
/// ``DemandState`` words and on each node's fill claim, deciding what to do next with the
/// transitions the library uses (`taking`, `releasing`, `givingBack`, `pinning`), for failure
/// types with a cancellation error, where whoever claims a node's fill ends its demand: a stop
/// (the last unit released, or `cancel()`) claims the fill for the cancellation and then ends
/// the demand (runs the producer's cancel handlers, or releases the unit held upstream, as a
/// step of its own); a decision that claims first settles and ends it; a stop that loses the
/// claim does nothing more. The parties:
/// - tasks awaiting `get()`, which take a unit and give up (their task is cancelled), or keep
///   waiting;
/// - a blocking `wait` that times out, giving its unit back;
/// - a handler, which pins;
/// - `cancel()`;
/// - the producer deciding with its value, and the stage's step once it has.
///
/// A search runs every order of their steps and checks, at the end of each:
/// - each node's demand ends at most once, and exactly once if it was decided or stopped;
/// - the producer's cancel handlers run at most once, never if the producer delivered its value
///   (guarantee 8), and never if nobody gave the work up;
/// - when every consumer that could give up did, and nothing holds the attempt for good, the
///   producer was told to stop unless it had delivered (guarantees 8 and 13);
/// - the stage never delivers a value after it stopped, and no unit count goes below zero.
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
        /// The stage derived from the producer's attempt.
        case stage
        /// The producer's own attempt.
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

/// Who consumes the attempt in the model.
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

/// One node of the model: its demand word, its fill claim, and what happened to it.
private struct ModelNode: Hashable {
    var demand = DemandState.initial
    var claimed = false
    var deliveredValue = false
    var decidedCancelled = false
    var demandEnds = 0
}

/// The shared memory of the model, and what happened.
private struct DemandMemory: Hashable {
    /// `nodes[0]` is the producer's attempt, `nodes[1]` the stage.
    var nodes = [ModelNode(), ModelNode()]
    /// Whether the stage still holds its unit on the producer (its `upstream`).
    var stageHoldsProducer = true
    /// How often the producer's cancel handlers ran, and whether they were released unrun.
    var cancelHandlerRuns = 0
    var cancelHandlersDropped = false
    /// Whether the producer's result is published, which lets the stage's step run.
    var producerPublished = false
    /// What a step found wrong while the steps ran.
    var violation: String?
}

/// One party's next atomic step.
///
/// `node` is 0 for the producer and 1 for the stage.
private enum Step: Hashable {
    case take(Consumer, node: Int)
    case holding(Consumer, node: Int)
    case pin(node: Int)
    case cancel(node: Int)
    /// A stop's claim of the fill for its cancellation, then the end of the demand.
    case stopClaim(node: Int)
    case endDemand(node: Int, stop: Bool)
    /// The stage releases the unit it held on the producer.
    case releaseOnProducer
    /// The producer decides with its value: claims, then settles.
    case finish
    case settle(node: Int, cancelled: Bool)
    /// The stage's step, once the producer's result is published.
    case stepStart
    case done

    func step(_ memory: inout DemandMemory) -> Step {
        switch self {
        case .take(let consumer, let node):
            guard !memory.nodes[node].claimed, let next = memory.nodes[node].demand.taking() else {
                return .done  // Reads the result without a unit.
            }
            memory.nodes[node].demand = next
            return .holding(consumer, node: node)
        case .holding(let consumer, let node):
            let (next, stops): (DemandState, Bool)
            switch consumer {
            case .reader(givesUp: false), .handler:
                return .done
            case .reader(givesUp: true):
                (next, stops) = memory.nodes[node].demand.releasing()
            case .waiter:
                (next, stops) = memory.nodes[node].demand.givingBack()
            }
            memory.release(node, to: next)
            return stops ? .stopClaim(node: node) : .done
        case .pin(let node):
            memory.nodes[node].demand = memory.nodes[node].demand.pinning()
            return .done
        case .cancel(let node):
            return .stopClaim(node: node)
        case .stopClaim(let node):
            guard !memory.nodes[node].claimed else {
                return .done  // Decided first: its decider ends the demand.
            }
            memory.nodes[node].claimed = true
            memory.nodes[node].decidedCancelled = true
            memory.nodes[node].demand = memory.nodes[node].demand.decidingCancelled()
            if node == 0 {
                memory.producerPublished = true
            }
            return .endDemand(node: node, stop: true)
        case .endDemand(let node, let stop):
            memory.nodes[node].demandEnds += 1
            if node == 1 {
                guard memory.stageHoldsProducer else {
                    return .done
                }
                memory.stageHoldsProducer = false
                return .releaseOnProducer
            }
            if stop {
                memory.cancelHandlerRuns += 1
            } else {
                memory.cancelHandlersDropped = true
            }
            return .done
        case .releaseOnProducer:
            let (next, stops) = memory.nodes[0].demand.releasing()
            memory.release(0, to: next)
            return stops ? .stopClaim(node: 0) : .done
        case .finish:
            guard !memory.nodes[0].claimed else {
                return .done
            }
            memory.nodes[0].claimed = true
            return .settle(node: 0, cancelled: false)
        case .settle(let node, let cancelled):
            if node == 0 {
                memory.producerPublished = true
            }
            memory.nodes[node].decidedCancelled = cancelled
            memory.nodes[node].deliveredValue = !cancelled
            return .endDemand(node: node, stop: false)
        case .stepStart:
            guard !memory.nodes[1].claimed else {
                return .done  // Decided already: the step never runs.
            }
            memory.nodes[1].claimed = true
            return .settle(node: 1, cancelled: memory.nodes[0].decidedCancelled)
        case .done:
            return .done
        }
    }
}

extension DemandMemory {
    /// Stores a released word, noting a count that went below zero.
    fileprivate mutating func release(_ node: Int, to next: DemandState) {
        if next.units > nodes[node].demand.units && violation == nil {
            violation = "a unit count of node \(node) went below zero"
        }
        nodes[node].demand = next
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
        let read = onProducer ? 0 : 1
        var parties: [Step] = consumers.map { consumer in
            consumer == .handler ? .pin(node: read) : .take(consumer, node: read)
        }
        if cancels { parties.append(.cancel(node: read)) }
        if finishes { parties += onProducer ? [.finish] : [.finish, .stepStart] }
        var memory = DemandMemory()
        if onProducer {
            memory.stageHoldsProducer = false
        } else {
            memory.nodes[0].demand = memory.nodes[0].demand.taking()!
        }
        visit(memory, parties, trace: [])
    }

    /// Whether `party` can take a step now: the stage's step starts only once the producer's
    /// result is published.
    private static func isEnabled(_ party: Step, _ memory: DemandMemory) -> Bool {
        if party == .stepStart {
            return memory.producerPublished
        }
        return party != .done
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
            visit(next, after, trace: trace + [index])
        }
        if !moved {
            check(memory, trace: trace)
        }
    }

    private mutating func check(_ memory: DemandMemory, trace: [Int]) {
        endings += 1
        let trace = "consumers \(consumers) of the \(onProducer ? "producer" : "stage"), steps \(trace)"
        if let violation = memory.violation {
            failures.append("\(violation), \(trace)")
        }
        for (index, node) in memory.nodes.enumerated() where !(onProducer && index == 1) {
            if node.demandEnds > 1 || (node.claimed && node.demandEnds != 1) {
                failures.append("node \(index)'s demand ended \(node.demandEnds) times, \(trace)")
            }
            if node.deliveredValue && node.decidedCancelled {
                failures.append("node \(index) delivered a value and a cancellation, \(trace)")
            }
        }
        if memory.cancelHandlerRuns > 1 || (memory.cancelHandlerRuns > 0 && memory.cancelHandlersDropped) {
            failures.append("the cancel handlers ran \(memory.cancelHandlerRuns) times, \(trace)")
        }
        let producer = memory.nodes[0]
        if producer.deliveredValue && memory.cancelHandlerRuns > 0 {
            failures.append("the producer was told to stop and delivered its value, \(trace)")
        }
        if !onProducer && memory.nodes[1].claimed && memory.stageHoldsProducer {
            failures.append("the stage's demand ended, and it still holds the producer, \(trace)")
        }
        // Every consumer that could give up did, and something gave the attempt up (a reader
        // that gave up, or `cancel()`): nothing needs the work any more.
        let gaveUp = consumers.contains(.reader(givesUp: true)) || cancels
        let holdsForGood = consumers.contains(.handler) || consumers.contains(.reader(givesUp: false))
        if !gaveUp && memory.cancelHandlerRuns > 0 {
            failures.append("the work was stopped though nobody gave it up (a wait that timed out?), \(trace)")
        }
        if gaveUp && !holdsForGood && !producer.deliveredValue && memory.cancelHandlerRuns != 1 {
            failures.append(
                "nothing needs the work, but the producer was not told to stop (word \(producer.demand.rawValue)), \(trace)"
            )
        }
    }
}
