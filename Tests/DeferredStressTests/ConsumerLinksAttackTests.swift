import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

extension StressSuites {
    /// Attacks on the consumer links an attempt keeps apart from its handler list (its second and
    /// later consumers, in segments, compacted once half of them left): racing fills, cancels,
    /// orphaning, compactions and registrations on two threads; deep chains of levels with
    /// several consumers each.
    @Suite struct ConsumerLinksAttackTests {
        static let rounds = TestSize.attack.raceRounds / 2

        // MARK: Fixtures

        /// A pending source whose writer sits in a slot, so that one thread can be the one that
        /// lets it go; an inline handler takes the inline slot, so that every consumer's link
        /// goes apart.
        final class Source: Sendable {
            let slot: NSLocked<HeldWriter<Int, TestError>?>
            let attempt: Attempt<Int, TestError>
            let stops = Counter()

            init(inlineHandler: Bool = true) {
                let writer = HeldWriter<Int, TestError>()
                writer.onCancel { [stops] in stops.increment() }
                attempt = writer.attempt
                slot = NSLocked(writer)
                if inlineHandler {
                    attempt.upon(.immediate) { _ in }
                }
            }

            @discardableResult
            func succeed(_ value: Int) -> Bool {
                let writer = slot.withLock { $0 }
                return writer?.succeed(with: value) ?? false
            }

            /// Releases the writer: the last reference goes on this thread.
            func lose() {
                let writer = slot.withLock { $0.take() }
                blackHole(writer)
            }

            var isLost: Bool { slot.withLock { $0 == nil } }
        }

        /// A `map` consumer of a source whose transform (which holds a tracked object) and
        /// handler count their runs, and which records what it delivered and on which side.
        final class Probe: Sendable {
            let stage: Attempt<Int, TestError>
            let bodyRuns: Counter
            let deliveries: Counter
            let delivered: NSLocked<Result<Int, TestError>?>
            let bodySide: NSLocked<String?>

            init(
                on source: Attempt<Int, TestError>, live: LiveCount? = nil, upon executor: some Executor = .immediate
            ) {
                let bodyRuns = Counter()
                let bodySide = NSLocked<String?>(nil)
                let deliveries = Counter()
                let delivered = NSLocked<Result<Int, TestError>?>(nil)
                self.bodyRuns = bodyRuns
                self.bodySide = bodySide
                self.deliveries = deliveries
                self.delivered = delivered
                let tracked = live.map { LifetimeTracked($0) }
                stage = source.map(upon: executor) { value in
                    _ = tracked
                    bodyRuns.increment()
                    bodySide.withLock { $0 = RaceHarness.currentSide }
                    return value + 1
                }
                stage.upon(.immediate) { result in
                    deliveries.increment()
                    delivered.withLock { $0 = result }
                }
            }

            var result: Result<Int, TestError>? { delivered.withLock { $0 } }

            func cancel() {
                stage.cancel()
            }
        }

        // MARK: Races: registration against the fill

        final class LateConsumerFixture: Sendable {
            let source: Source
            let early: [Probe]
            let late = NSLocked<Probe?>(nil)

            init() {
                let source = Source()
                self.source = source
                early = (0..<3).map { _ in Probe(on: source.attempt) }
                early[1].cancel()  // one left: a departure, a compaction
            }
        }

        /// A consumer added while the source fills (after the earlier ones went apart) is
        /// delivered exactly once, by the fill or by its registrant.
        @Test func aConsumerAddedDuringTheFillIsDeliveredOnce() {
            RaceHarness.expectInterleavings(
                "consumer added during the fill",
                rounds: Self.rounds,
                expected: ["delivered by the fill", "delivered by the registrant"],
                setup: { LateConsumerFixture() },
                left: { $0.source.succeed(1) },
                right: { fixture in
                    let probe = Probe(on: fixture.source.attempt)
                    fixture.late.withLock { $0 = probe }
                },
                classify: { fixture in
                    let late = fixture.late.withLock { $0 }!
                    #expect(late.bodyRuns.value == 1, "the late consumer's transform ran \(late.bodyRuns.value) times")
                    #expect(late.deliveries.value == 1, "the late consumer delivered \(late.deliveries.value) times")
                    #expect(late.result == .success(2))
                    for (index, probe) in fixture.early.enumerated() {
                        #expect(probe.deliveries.value == 1)
                        if index == 1 {
                            #expect(probe.result == .failure(.cancelled))
                            #expect(probe.bodyRuns.value == 0, "a cancelled consumer's step ran")
                        } else {
                            #expect(probe.result == .success(2))
                            #expect(probe.bodyRuns.value == 1)
                        }
                    }
                    switch late.bodySide.withLock({ $0 }) {
                    case "left": return "delivered by the fill"
                    case "right": return "delivered by the registrant"
                    case let other: return "transform ran on \(other ?? "nil")"
                    }
                })
        }

        // MARK: Races: cancel and compaction against the fill

        final class CancelFixture: Sendable {
            let source: Source
            let probes: [Probe]
            let cancelled: [Int]

            init(consumers: Int, cancelling: [Int]) {
                let source = Source()
                self.source = source
                probes = (0..<consumers).map { _ in Probe(on: source.attempt) }
                cancelled = cancelling
            }
        }

        static func checkCancelRound(_ fixture: CancelFixture) -> String {
            // Plain checks gathered into one expectation a round: thousands of `#expect`s a test
            // cost most of its time under a sanitizer.
            var valued = 0
            var wrong: [String] = []
            for (index, probe) in fixture.probes.enumerated() {
                if probe.deliveries.value != 1 {
                    wrong.append("consumer \(index) delivered \(probe.deliveries.value) times")
                }
                if fixture.cancelled.contains(index) {
                    switch probe.result {
                    case .success(2)?:
                        if probe.bodyRuns.value != 1 {
                            wrong.append(
                                "cancelled consumer \(index) delivered the value after \(probe.bodyRuns.value) runs")
                        }
                        valued += 1
                    case .failure(.cancelled)?:
                        // A transform that passed its start check as the cancel came may run (its
                        // result is dropped): the stamps cannot tell that from a late start, so
                        // only the scenarios, which cancel before the fill, check that none runs.
                        break
                    case let other:
                        wrong.append("cancelled consumer \(index) delivered \(String(describing: other))")
                    }
                } else if probe.result != .success(2) || probe.bodyRuns.value != 1 {
                    wrong.append(
                        "consumer \(index) delivered \(String(describing: probe.result)) after \(probe.bodyRuns.value) runs"
                    )
                }
            }
            #expect(wrong.isEmpty, "\(wrong.prefix(10))")
            #expect(fixture.source.stops.value == 0, "the inline handler still needed the source")
            return valued == 0
                ? "every cancel first"
                : valued == fixture.cancelled.count ? "the fill first" : "cancels and fill interleaved"
        }

        /// `cancel()` of consumers apart racing the source's `succeed`: each delivers the value or
        /// the cancellation, once, and a consumer that delivered the cancellation never ran its step.
        @Test func cancelOfConsumersApartRacesTheFill() {
            RaceHarness.expectInterleavings(
                "cancel of consumers apart against succeed",
                rounds: Self.rounds,
                expected: ["every cancel first", "the fill first", "cancels and fill interleaved"],
                setup: { CancelFixture(consumers: 6, cancelling: [1, 3, 5]) },
                left: { $0.source.succeed(1) },
                right: { fixture in
                    for index in fixture.cancelled { fixture.probes[index].cancel() }
                },
                classify: Self.checkCancelRound)
        }

        /// Many consumers, most cancelled on one thread (compacting several times) while the
        /// other fills the source.
        @Test func compactionsRaceTheFill() {
            let cancelling = Array(stride(from: 0, to: 64, by: 4)) + Array(stride(from: 1, to: 64, by: 2))
            RaceHarness.expectInterleavings(
                "compactions against succeed",
                rounds: Self.rounds / 2,
                expected: ["every cancel first", "the fill first", "cancels and fill interleaved"],
                setup: { CancelFixture(consumers: 64, cancelling: cancelling.sorted()) },
                left: { $0.source.succeed(1) },
                right: { fixture in
                    for index in fixture.cancelled { fixture.probes[index].cancel() }
                },
                classify: Self.checkCancelRound)
        }

        final class TwoCancellersFixture: Sendable {
            let source: Source
            let probes: [Probe]

            init() {
                let source = Source()
                self.source = source
                probes = (0..<40).map { _ in Probe(on: source.attempt) }
            }
        }

        /// Two threads cancel consumers of one source at once, so that their departures and
        /// compactions overlap; then the source fills: the others each get the value once.
        @Test func twoThreadsCompactOneSourceAtOnce() {
            let leftCancels = Array(stride(from: 0, to: 40, by: 3))
            let rightCancels = Array(stride(from: 1, to: 40, by: 3))
            RaceHarness.expectInterleavings(
                "two threads cancel consumers of one source",
                rounds: Self.rounds / 2,
                expected: ["done"],
                setup: { TwoCancellersFixture() },
                left: { fixture in
                    for index in leftCancels { fixture.probes[index].cancel() }
                },
                right: { fixture in
                    for index in rightCancels { fixture.probes[index].cancel() }
                },
                classify: { fixture in
                    #expect(fixture.source.succeed(1))
                    for (index, probe) in fixture.probes.enumerated() {
                        #expect(probe.deliveries.value == 1)
                        if leftCancels.contains(index) || rightCancels.contains(index) {
                            #expect(probe.result == .failure(.cancelled))
                            #expect(probe.bodyRuns.value == 0, "cancelled consumer \(index)'s step ran")
                        } else {
                            #expect(
                                probe.result == .success(2), "consumer \(index): \(String(describing: probe.result))")
                        }
                    }
                    return "done"
                })
        }

        // MARK: Races: orphaning

        final class OrphanFixture: Sendable {
            let live: LiveCount
            let source: Source
            let early: [Probe]
            let late = NSLocked<[Probe]>([])
            let lostBeforeAdding = NSLocked<Bool?>(nil)

            init() {
                let live = LiveCount()
                let source = Source()
                self.live = live
                self.source = source
                early = (0..<6).map { _ in Probe(on: source.attempt, live: live) }
                early[0].cancel()
            }
        }

        /// Consumers added and cancelled (compacting) while the writer goes: every transform is
        /// released, none runs, only a cancellation is ever delivered.
        @Test func consumersRacingTheOrphaningAreAllReleased() {
            RaceHarness.expectInterleavings(
                "consumers against the writer's release",
                rounds: Self.rounds,
                expected: ["orphaned before the adds", "orphaned during or after the adds"],
                setup: { OrphanFixture() },
                left: { $0.source.lose() },
                right: { fixture in
                    fixture.lostBeforeAdding.withLock { $0 = fixture.source.isLost }
                    var late: [Probe] = []
                    for index in 0..<4 {
                        let probe = Probe(on: fixture.source.attempt, live: fixture.live)
                        if index == 1 { probe.cancel() }
                        late.append(probe)
                    }
                    fixture.early[2].cancel()
                    fixture.early[3].cancel()
                    fixture.late.withLock { $0 = late }
                },
                classify: { fixture in
                    #expect(fixture.live.value == 0, "\(fixture.live.value) transforms alive after the orphaning")
                    let late = fixture.late.withLock { $0 }
                    let cancelled: Set<ObjectIdentifier> = Set(
                        [fixture.early[0], fixture.early[2], fixture.early[3], late[1]].map(ObjectIdentifier.init))
                    for probe in fixture.early + late {
                        #expect(probe.bodyRuns.value == 0, "a transform ran on an orphaned source")
                        #expect(probe.deliveries.value <= 1)
                        if cancelled.contains(ObjectIdentifier(probe)) {
                            #expect(probe.result == nil || probe.result == .failure(.cancelled))
                        } else {
                            #expect(probe.deliveries.value == 0, "delivered \(String(describing: probe.result))")
                            #expect(probe.stage.peek() == nil)
                        }
                    }
                    return fixture.lostBeforeAdding.withLock({ $0 }) == true
                        ? "orphaned before the adds" : "orphaned during or after the adds"
                })
        }

        // MARK: Races: many consumers from two threads, in order

        final class CrowdFixture: Sendable {
            static let perSide = 300
            let live = LiveCount()
            let source = Source()
            let manual = ManualExecutor()
            let started = NSLocked<[(side: Int, index: Int)]>([])
            let stages = NSLocked<[[Attempt<Int, TestError>]]>([[], []])
            let cancelled = NSLocked<[Set<Int>]>([[], []])
            let deliveries = NSLocked<[[Int: Int]]>([[:], [:]])
            let clock = Counter()
            let spans = NSLocked<[(start: Int, end: Int)]>([(0, 0), (0, 0)])

            /// Adds consumers (a few cancelled, some right away, some later) and handlers from
            /// one side, each recording when its transform or callback starts.
            func add(side: Int) {
                let begin = clock.increment()
                var mine: [Attempt<Int, TestError>] = []
                var gone: Set<Int> = []
                for index in 0..<Self.perSide {
                    if index % 7 == 3 {
                        source.attempt.uponSuccess(manual) { [started] _ in
                            started.withLock { $0.append((side, index)) }
                        }
                        mine.append(Attempt(filledWith: .success(0)))
                        continue
                    }
                    let tracked = LifetimeTracked(live)
                    let stage = source.attempt.map(upon: manual) { [started] value in
                        _ = tracked
                        started.withLock { $0.append((side, index)) }
                        return value + 1
                    }
                    stage.upon(.immediate) { [deliveries] _ in
                        deliveries.withLock { $0[side][index, default: 0] += 1 }
                    }
                    mine.append(stage)
                    if index % 5 == 1 {
                        stage.cancel()
                        gone.insert(index)
                    }
                    if index % 11 == 10 {
                        mine[index - 4].cancel()  // an older one leaves (a placeholder: nothing)
                        if (index - 4) % 7 != 3 {
                            gone.insert(index - 4)
                        }
                    }
                }
                let end = clock.increment()
                stages.withLock { $0[side] = mine }
                cancelled.withLock { $0[side] = gone }
                spans.withLock { $0[side] = (begin, end) }
            }
        }

        /// Thousands of consumers added from two threads at once, with cancels among them: once
        /// the source fills, each side's transforms and callbacks start in the order that side
        /// added them, every stage left delivers once, no cancelled stage's transform runs, and
        /// everything is released.
        @Test func twoThreadsAddManyConsumersWithCancelsInOrder() {
            RaceHarness.expectInterleavings(
                "two threads add consumers",
                rounds: TestSize.attackLoop(120),
                expected: ["overlapped", "one side first"],
                // 300 registrations a side nearly always overlap (800 of 800 rounds in a release
                // run): "one side first" is what a round that did not overlap is, not a case to
                // wait for; the order and once checks hold in every round.
                requireEvery: false,
                setup: { CrowdFixture() },
                left: { $0.add(side: 0) },
                right: { $0.add(side: 1) },
                classify: { fixture in
                    #expect(fixture.source.succeed(1))
                    fixture.manual.runUntilIdle()
                    let started = fixture.started.withLock { $0 }
                    let cancelled = fixture.cancelled.withLock { $0 }
                    let deliveries = fixture.deliveries.withLock { $0 }
                    // Gathered into one expectation a round (see `checkCancelRound`).
                    var wrong: [String] = []
                    for side in 0..<2 {
                        let order = started.filter { $0.side == side }.map(\.index)
                        if order != order.sorted() {
                            wrong.append("side \(side) started out of order: \(order.prefix(40))")
                        }
                        let ran = Set(order)
                        for index in ran.intersection(cancelled[side]).sorted() {
                            wrong.append("side \(side): cancelled \(index) ran its step")
                        }
                        for index in 0..<CrowdFixture.perSide where index % 7 != 3 {
                            if deliveries[side][index] != 1 {
                                wrong.append(
                                    "side \(side): stage \(index) delivered \(deliveries[side][index] ?? 0) times")
                            }
                            if !cancelled[side].contains(index) && !ran.contains(index) {
                                wrong.append("side \(side): stage \(index) never started")
                            }
                        }
                    }
                    #expect(wrong.isEmpty, "\(wrong.prefix(10))")
                    fixture.stages.withLock { $0 = [[], []] }
                    #expect(fixture.live.value == 0, "\(fixture.live.value) transforms alive")
                    let spans = fixture.spans.withLock { $0 }
                    return spans[0].end < spans[1].start || spans[1].end < spans[0].start
                        ? "one side first" : "overlapped"
                })
        }

        // MARK: Races: shared-run callers and join inputs apart

        final class SharedFixture: Sendable {
            let source: Source
            let shared: SharedAttempts<Int, Int, TestError>
            let keeper: Attempt<Int, TestError>
            let callers: [Attempt<Int, TestError>]
            let deliveries: [Counter]
            let results: NSLocked<[Int: Result<Int, TestError>]>

            init() {
                let source = Source()
                let shared = SharedAttempts<Int, Int, TestError>()
                self.source = source
                self.shared = shared
                let attempt = source.attempt
                keeper = shared.attempt(for: 0) { _ in attempt }
                keeper.upon(.immediate) { _ in }
                callers = (0..<6).map { _ in shared.attempt(for: 0) { _ in attempt } }
                let deliveries = callers.map { _ in Counter() }
                self.deliveries = deliveries
                results = NSLocked([:])
                for (index, caller) in callers.enumerated() {
                    caller.upon(.immediate) { [self] result in
                        deliveries[index].increment()
                        results.withLock { $0[index] = result }
                    }
                }
            }
        }

        /// Callers of a shared run that give up while the run's source fills: each delivers once.
        @Test func sharedRunCallersGivingUpRaceTheFill() {
            RaceHarness.expectInterleavings(
                "shared-run callers give up against succeed",
                rounds: Self.rounds,
                expected: ["every cancel first", "the fill first", "interleaved"],
                setup: { SharedFixture() },
                left: { $0.source.succeed(1) },
                right: { fixture in
                    for index in [0, 2, 3, 5] { fixture.callers[index].cancel() }
                },
                classify: { fixture in
                    var valued = 0
                    for index in 0..<6 {
                        #expect(
                            fixture.deliveries[index].value == 1,
                            "caller \(index) delivered \(fixture.deliveries[index].value)")
                        let result = fixture.results.withLock { $0[index] }
                        if [0, 2, 3, 5].contains(index) {
                            #expect(result == .success(1) || result == .failure(.cancelled))
                            if result == .success(1) { valued += 1 }
                        } else {
                            #expect(result == .success(1))
                        }
                    }
                    #expect(fixture.keeper.peek() == .success(1))
                    return valued == 0 ? "every cancel first" : valued == 4 ? "the fill first" : "interleaved"
                })
        }

        final class JoinFixture: Sendable {
            let source: Source
            let other: HeldWriter<Int, TestError>
            let joins: [Attempt<[Int], TestError>]
            let deliveries: [Counter]

            init() {
                let source = Source()
                let other = HeldWriter<Int, TestError>()
                self.source = source
                self.other = other
                let attempt = source.attempt
                _ = attempt.map(upon: .immediate) { $0 }  // a consumer apart before the joins
                joins = (0..<5).map { index in
                    index % 2 == 0 ? [attempt, other.attempt].allSucceeded() : [attempt, attempt].allSucceeded()
                }
                let deliveries = joins.map { _ in Counter() }
                self.deliveries = deliveries
                for (index, join) in joins.enumerated() {
                    join.upon(.immediate) { _ in deliveries[index].increment() }
                }
            }
        }

        /// Joins whose inputs wait apart, cancelled while the source fills and their other input
        /// succeeds.
        @Test func joinInputsApartRaceTheFill() {
            RaceHarness.expectInterleavings(
                "join inputs apart against succeed",
                rounds: Self.rounds,
                expected: ["done"],
                setup: { JoinFixture() },
                left: { fixture in
                    fixture.source.succeed(1)
                    fixture.other.succeed(with: 2)
                },
                right: { fixture in
                    fixture.joins[1].cancel()
                    fixture.joins[2].cancel()
                },
                classify: { fixture in
                    for (index, join) in fixture.joins.enumerated() {
                        #expect(
                            fixture.deliveries[index].value == 1,
                            "join \(index) delivered \(fixture.deliveries[index].value)")
                        let expected: Result<[Int], TestError> = index % 2 == 0 ? .success([1, 2]) : .success([1, 1])
                        if index == 1 || index == 2 {
                            #expect(join.peek() == expected || join.peek() == .failure(.cancelled))
                        } else {
                            #expect(join.peek() == expected)
                        }
                    }
                    return "done"
                })
        }

        // MARK: Scenarios

        /// A cancelled consumer apart never runs its step, whatever its place among the others.
        @Test func cancelledConsumersApartNeverRunTheirSteps() {
            let source = Source(inlineHandler: false)
            let live = LiveCount()
            let probes = (0..<1_000).map { _ in Probe(on: source.attempt, live: live) }
            for (index, probe) in probes.enumerated() where index % 3 != 0 {
                probe.cancel()
            }
            #expect(
                live.value >= 334 && live.value < 334 + 400,
                "\(live.value) transforms alive: compaction keeps at most about half")
            #expect(source.succeed(5))
            for (index, probe) in probes.enumerated() {
                #expect(probe.deliveries.value == 1)
                if index % 3 == 0 {
                    #expect(probe.result == .success(6))
                } else {
                    #expect(probe.result == .failure(.cancelled))
                    #expect(probe.bodyRuns.value == 0)
                }
            }
            #expect(live.value == 0)
        }

        /// Every consumer cancelled: the last one stops the source (its producer is told), and
        /// a consumer added afterwards gets the cancellation.
        @Test func theLastConsumerApartToLeaveStopsTheSource() {
            let source = Source(inlineHandler: false)
            let live = LiveCount()
            let probes = (0..<50).map { _ in Probe(on: source.attempt, live: live) }
            for probe in probes.dropLast() { probe.cancel() }
            #expect(source.stops.value == 0)
            probes.last!.cancel()
            #expect(source.stops.value == 1)
            #expect(live.value == 0)
            let late = Probe(on: source.attempt)
            #expect(late.result == .failure(.cancelled))
            #expect(late.bodyRuns.value == 0)
        }

        /// A transform that runs during the fill adds consumers to its source and cancels others
        /// that have not run yet: each later consumer delivers exactly once.
        @Test func consumersAddedAndCancelledFromInsideTheFill() {
            let source = Source()
            let added = NSLocked<[Probe]>([])
            let later = NSLocked<[Probe]>([])
            let trigger = source.attempt.map(upon: .immediate) { value in
                for probe in later.withLock({ $0 }).prefix(3) { probe.cancel() }
                let probe = Probe(on: source.attempt)
                added.withLock { $0.append(probe) }
                return value
            }
            later.withLock { list in list = (0..<6).map { _ in Probe(on: source.attempt) } }
            #expect(source.succeed(1))
            #expect(trigger.peek() == .success(1))
            for (index, probe) in later.withLock({ $0 }).enumerated() {
                #expect(probe.deliveries.value == 1)
                #expect(probe.result == (index < 3 ? .failure(.cancelled) : .success(2)))
            }
            for probe in added.withLock({ $0 }) {
                #expect(probe.deliveries.value == 1)
                #expect(probe.result == .success(2))
            }
        }

        /// A callback of a cancelled consumer (run as the cancel ends) adds a consumer to the
        /// same pending source and cancels another: nothing deadlocks, everything delivers once.
        @Test func aCancellationCallbackAddsAndCancelsConsumersOfTheSameSource() {
            let source = Source()
            let live = LiveCount()
            let chained = NSLocked<[Probe]>([])
            var probes: [Probe] = []
            for _ in 0..<20 {
                probes.append(Probe(on: source.attempt, live: live))
            }
            for index in stride(from: 0, to: 20, by: 2) {
                let probe = probes[index]
                let next = probes[index + 1]
                probe.stage.upon(.immediate) { [live] _ in
                    let added = Probe(on: source.attempt, live: live)
                    chained.withLock { $0.append(added) }
                    next.cancel()
                }
            }
            let snapshot = probes
            let finished = returnsOnAThread(within: 20) {
                for index in stride(from: 0, to: 20, by: 4) { snapshot[index].cancel() }
            }
            #expect(finished, "cancelling returned")
            #expect(source.succeed(3))
            for (index, probe) in probes.enumerated() {
                #expect(probe.deliveries.value == 1)
                switch index % 4 {
                case 0, 1: #expect(probe.result == .failure(.cancelled), "probe \(index)")
                case 2: #expect(probe.result == .success(4), "probe \(index)")
                default:  // cancelled by the callback of the one before, which may come first
                    #expect(probe.result == .success(4) || probe.result == .failure(.cancelled), "probe \(index)")
                }
            }
            for probe in chained.withLock({ $0 }) {
                #expect(probe.deliveries.value == 1)
                #expect(probe.result == .success(4))
            }
            probes = []
            blackHole(snapshot)
            chained.withLock { $0 = [] }
            #expect(live.value == 0)
        }

        /// Stages of `andThen` that all follow one inner attempt (their links to it go apart),
        /// some cancelled once they follow it; then the inner attempt fills, or its writer goes.
        @Test(arguments: [false, true])
        func andThenStagesFollowingOneInnerAttemptApart(orphaned: Bool) {
            let outer = Source()
            let inner = Source()
            let live = LiveCount()
            let deliveries = Counter()
            let innerAttempt = inner.attempt
            var stages: [Attempt<Int, TestError>] = []
            for _ in 0..<200 {
                let tracked = LifetimeTracked(live)
                let stage = outer.attempt.andThen(upon: .immediate) { _ in
                    _ = tracked
                    return innerAttempt
                }
                stage.upon(.immediate) { _ in deliveries.increment() }
                stages.append(stage)
            }
            #expect(outer.succeed(1))
            for (index, stage) in stages.enumerated() where index % 3 != 0 {
                stage.cancel()
            }
            #expect(deliveries.value == 133, "the cancelled stages delivered their cancellation")
            if orphaned {
                inner.lose()
            } else {
                #expect(inner.succeed(7))
            }
            for (index, stage) in stages.enumerated() {
                if index % 3 != 0 {
                    #expect(stage.peek() == .failure(.cancelled))
                } else {
                    #expect(stage.peek() == (orphaned ? nil : .success(7)), "stage \(index)")
                }
            }
            #expect(deliveries.value == (orphaned ? 133 : 200))
            #expect(live.value == 0)
        }

        // MARK: Deep chains with several consumers a level

        enum RootEnd: String, CaseIterable, Sendable {
            case fill, cancel, orphan
        }

        /// What a deep chain ended as.
        struct DeepOutcome: Sendable {
            var tail: Result<Int, TestError>?
            var tailDeliveries: Int
            var liveAfter: Int
            var siblingDeliveries: Int
            var siblingsCancelled: Bool
        }

        /// Builds a chain of `depth` levels, each with three `map` stages of which two are
        /// cancelled (the continuing one first, middle or last), ends the root, and reports.
        static func deepChain(depth: Int, continuingAt position: Int, end: RootEnd) -> DeepOutcome {
            let live = LiveCount()
            let tailDeliveries = Counter()
            let siblingDeliveries = Counter()
            let tailResult = NSLocked<Result<Int, TestError>?>(nil)
            var siblingsCancelled = true
            let tail: Attempt<Int, TestError>
            do {
                let source = Source(inlineHandler: false)
                var level = source.attempt
                var siblings: [Attempt<Int, TestError>] = []
                siblings.reserveCapacity(2 * depth)
                for _ in 0..<depth {
                    // All three first, then the two cancels: a consumer cancelled while it is
                    // the only one would stop its level.
                    let stages = (0..<3).map { _ in
                        let tracked = LifetimeTracked(live)
                        return level.map(upon: .immediate) { value in
                            _ = tracked
                            return value + 1
                        }
                    }
                    for (slot, stage) in stages.enumerated() where slot != position {
                        stage.upon(.immediate) { _ in siblingDeliveries.increment() }
                        stage.cancel()
                        siblings.append(stage)
                    }
                    level = stages[position]
                }
                tail = level
                tail.upon(.immediate) { result in
                    tailDeliveries.increment()
                    tailResult.withLock { $0 = result }
                }
                switch end {
                case .fill: _ = source.succeed(0)
                case .cancel: source.attempt.cancel()
                case .orphan: source.lose()
                }
                siblingsCancelled = siblings.allSatisfy { $0.peek() == .failure(.cancelled) }
            }
            let outcome = DeepOutcome(
                tail: tailResult.withLock { $0 }, tailDeliveries: tailDeliveries.value, liveAfter: live.value,
                siblingDeliveries: siblingDeliveries.value, siblingsCancelled: siblingsCancelled)
            blackHole(tail)
            return outcome
        }

        @Test(.skippedUnderThreadSanitizer, arguments: RootEnd.allCases, [0, 1, 2])
        func deepChainOfLevelsWithCancelledSiblings(end: RootEnd, continuingAt position: Int) async {
            let depth = TestSize.attack.depth
            let outcome = await onDeepStack(
                "consumers apart, \(end.rawValue), continuing at \(position)", size: TestSize.attack
            ) {
                Self.deepChain(depth: depth, continuingAt: position, end: end)
            }
            #expect(outcome.siblingsCancelled)
            #expect(outcome.siblingDeliveries == 2 * depth)
            switch end {
            case .fill:
                #expect(outcome.tail == .success(depth))
                #expect(outcome.tailDeliveries == 1)
            case .cancel:
                #expect(outcome.tail == .failure(.cancelled))
                #expect(outcome.tailDeliveries == 1)
            case .orphan:
                #expect(outcome.tail == nil)
                #expect(outcome.tailDeliveries == 0)
            }
            #expect(outcome.liveAfter == 0, "\(outcome.liveAfter) transforms alive after the root ended")
        }

        /// The same chain, its tail cancelled: the cancel travels up every level (the siblings
        /// left), stops the producer and releases every transform.
        @Test(.skippedUnderThreadSanitizer)
        func deepChainOfLevelsWithCancelledSiblingsCancelledFromTheTail() async {
            let depth = TestSize.attack.depth
            let (live, stops) = await onDeepStack("consumers apart, tail cancelled", size: TestSize.attack) {
                () -> (Int, Int) in
                let live = LiveCount()
                let source = Source(inlineHandler: false)
                do {
                    var level = source.attempt
                    for _ in 0..<depth {
                        let stages = (0..<3).map { _ in
                            let tracked = LifetimeTracked(live)
                            return level.map(upon: .immediate) { value in
                                _ = tracked
                                return value + 1
                            }
                        }
                        stages[0].cancel()
                        stages[2].cancel()
                        level = stages[1]
                    }
                    level.cancel()
                    blackHole(level)
                }
                return (live.value, source.stops.value)
            }
            #expect(live == 0, "\(live) transforms alive after the chain went")
            #expect(stops == 1, "the producer was told to stop")
        }
    }
}
