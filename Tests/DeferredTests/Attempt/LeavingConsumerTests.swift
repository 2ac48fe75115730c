import DeferredExecutors
import Dispatch
import Synchronization
import TestSupport
import Testing

@testable import Deferred

/// A consumer that leaves a pending source leaves nothing behind: a cancelled derived stage, a
/// shared run's caller that gave up, any consumer that decided before its source gives back its
/// place in the source's list, while the links keep guarantee 3's order.
@Suite struct LeavingConsumerTests {
    /// A source that stays pending while a handler needs it, and how many links it holds apart.
    final class PendingSource: Sendable {
        let writer = HeldWriter<Int, TestError>()
        let stopped = Counter()

        init() {
            writer.onCancel { [stopped] in stopped.increment() }
            writer.attempt.upon(.immediate) { _ in }  // needs it for good, in the inline slot
        }

        var attempt: Attempt<Int, TestError> { writer.attempt }

        /// The consumer links that the source keeps apart from its handler list.
        var linksKept: Int {
            let bits = attempt.node.waiterRegistry.load(ordering: .acquiring) & ~recordedBit
            guard bits != 0 else { return 0 }
            let registry: WaiterRegistry<Result<Int, TestError>> = RetainedBits.borrow(bits)
            return registry.existingConsumerLinks?.linkCount ?? 0
        }
    }

    /// The most links of consumers that left a source keeps: those that wait for the fewest
    /// departures that make a compaction, beside the one link of a consumer still there.
    static let mostKept = AnyConsumerLinks.fewestDeparturesToCompact

    @Test(arguments: AttemptKind.allCases)
    func everyKindOfStageThatLeavesGivesBackItsPlace(_ kind: AttemptKind) {
        let source = PendingSource()
        let queue = DispatchQueue(label: "delays")
        var mostKept = 0
        for _ in 0..<2_000 {
            let stage = kind.stage(after: source.attempt, delayingOn: queue)
            stage.upon(.immediate) { _ in }
            stage.cancel()
            mostKept = max(mostKept, source.linksKept)
        }
        #expect(mostKept <= Self.mostKept, "\(kind): \(mostKept) links of stages that left were kept")
        #expect(source.stopped.value == 0, "the handler still needs the source")
        #expect(source.writer.succeed(with: 1))
    }

    @Test func stagesThatLeaveInBatchesAreGivenBackOnceTheyAreHalfTheLinks() {
        let source = PendingSource()
        let live = LiveCount()
        for _ in 0..<20 {
            let stages = (0..<500).map { _ in
                let tracked = LifetimeTracked(live)
                return source.attempt.map(upon: .immediate) {
                    _ = tracked
                    return $0
                }
            }
            #expect(source.linksKept >= 500)
            for stage in stages { stage.cancel() }
        }
        #expect(source.linksKept <= Self.mostKept, "\(source.linksKept) links kept after every stage left")
        #expect(live.value <= Self.mostKept, "\(live.value) transforms of stages that left are alive")
        #expect(source.writer.succeed(with: 1))
    }

    @Test func aStageThatDecidesByItselfGivesBackItsPlaceToo() {
        let source = PendingSource()
        let clock = VirtualTimeExecutor()
        for _ in 0..<1_000 {
            let limited = source.attempt.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
            limited.upon(.immediate) { _ in }
            clock.advance(by: .seconds(1))
            #expect(limited.peek() == .failure(.timedOut))
        }
        #expect(source.linksKept <= Self.mostKept)
        #expect(source.stopped.value == 0)
    }

    /// Guarantee 3 across consumers apart and handlers: callbacks and stages (some cancelled)
    /// added on one thread start in order on a serial executor.
    @Test func consumersAndHandlersStartInTheOrderTheyWereAdded() {
        let source = PendingSource()
        let manual = ManualExecutor()
        let order = Mutex<[String]>([])
        @Sendable func log(_ name: String) { order.withLock { $0.append(name) } }
        var keep: [Attempt<Int, TestError>] = []
        source.attempt.uponSuccess(manual) { _ in log("a") }
        keep.append(
            source.attempt.map(upon: manual) {
                log("b")
                return $0
            })
        keep.append(
            source.attempt.map(upon: manual) {
                log("c")
                return $0
            })
        source.attempt.uponSuccess(manual) { _ in log("d") }
        let cancelled = source.attempt.map(upon: manual) {
            log("never")
            return $0
        }
        keep.append(
            source.attempt.map(upon: manual) {
                log("e")
                return $0
            })
        cancelled.cancel()
        keep.append(
            source.attempt.recover(upon: manual) { _ in
                log("never")
                return 0
            })
        source.attempt.uponSuccess(manual) { _ in log("f") }
        keep.append(
            source.attempt.map(upon: manual) {
                log("g")
                return $0
            })
        source.attempt.uponSuccess(manual) { _ in log("h") }
        #expect(source.writer.succeed(with: 1))
        manual.runUntilIdle()
        #expect(order.withLock { $0 } == ["a", "b", "c", "d", "e", "f", "g", "h"])
        withExtendedLifetime(keep) {}
    }

    /// A source whose writer goes while consumers wait apart: every consumer is orphaned and
    /// released, the ones that left before it and the ones still waiting.
    @Test func consumersApartAreReleasedWhenTheirSourceIsOrphaned() {
        let live = LiveCount()
        var stages: [Attempt<Int, TestError>] = []
        do {
            let writer = DeferredAttempt<Int, TestError>()
            writer.attempt.upon(.immediate) { _ in }
            for index in 0..<100 {
                let tracked = LifetimeTracked(live)
                let stage = writer.attempt.map(upon: .immediate) {
                    _ = tracked
                    return $0
                }
                if index % 3 == 0 {
                    stage.cancel()
                }
                stages.append(stage)
            }
        }
        #expect(live.value == 0, "\(live.value) transforms are alive after the writer went")
        #expect(stages.allSatisfy { $0.peek() == nil || $0.isCancelled })
    }
}
