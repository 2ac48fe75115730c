import Deferred
import Dispatch
import Foundation
import TestSupport
import Testing

/// Guarantees 2, 4 and 5 for every way of deriving a future (``FutureKind``), on every kind of
/// executor (``ExecutorKind``): one parameterized test per guarantee, so a combinator or an
/// executor that breaks one shows up by name.
///
/// The deep tests build chains of `Stress.depth` stages (1,000,000 unless
/// `DEFERRED_STRESS_DEPTH` says otherwise) on the immediate executor, the one that would recurse,
/// with delays and limits on a virtual clock. The others run a shallow chain on every executor.
@Suite struct CombinatorGuaranteeTests {
    static let depth = Stress.depth
    static let shallow = 20

    /// Guarantee 4: a chain of a million stages of one kind fills without overflowing the stack,
    /// and each step runs once.
    @Test(arguments: FutureKind.allCases)
    func aMillionDeepChainFills(_ kind: FutureKind) async {
        let (tail, runs) = await onDeepStack("\(kind) chain, filled") {
            let executor = ExecutorKind.immediate.make()
            let probe = StageProbe(LiveCount())
            let root = Deferred<Int>()
            var tail = Future(root)
            for _ in 0..<Self.depth {
                tail = kind.stage(after: tail, on: executor, probe: probe)
            }
            root.fill(with: 0)
            executor.settle { tail.isFilled }
            return (tail.peek(), probe.runs.value)
        }
        #expect(tail == kind.tail(depth: Self.depth))
        #expect(runs == kind.steps(depth: Self.depth))
    }

    /// Guarantees 4 and 5: dropping an unfilled chain of a million stages releases every stage
    /// and the handler at its end, with a loop rather than a recursion.
    @Test(arguments: FutureKind.allCases)
    func droppingAMillionDeepUnfilledChainReleasesIt(_ kind: FutureKind) async {
        let live = LiveCount()
        await onDeepStack("\(kind) chain, dropped") {
            let executor = ExecutorKind.immediate.make()
            let probe = StageProbe(live)
            let root = Deferred<Int>()  // Held to the end, so the whole chain is released at once.
            var tail = Future(root)
            for _ in 0..<Self.depth {
                tail = kind.stage(after: tail, on: executor, probe: probe)
            }
            let tracked = LifetimeTracked(live)
            tail.upon(executor.executor) { _ in _ = tracked }
            withExtendedLifetime(root) {}
        }
        #expect(live.value == 0)
    }

    /// Guarantees 2 and 5: on every executor, each step and the handler at the end run exactly
    /// once, after the fill, and each closure is released right after it runs, while the chain
    /// is still referenced.
    @Test(arguments: FutureKind.allCases, ExecutorKind.allCases)
    func everyStepRunsOnceAfterTheFillAndIsReleased(_ kind: FutureKind, _ executorKind: ExecutorKind) async {
        let live = LiveCount()
        let executor = executorKind.make()
        let root = Deferred<Int>()
        let handled = Counter()
        let delivered = Deferred<Int>()
        let runs: Counter
        var tail = Future(root)
        do {
            let probe = StageProbe(live)
            runs = probe.runs
            for _ in 0..<Self.shallow {
                tail = kind.stage(after: tail, on: executor, probe: probe)
            }
            let tracked = LifetimeTracked(live)
            tail.upon(executor.executor) { [tracked] value in
                withExtendedLifetime(tracked) {
                    handled.increment()
                    delivered.fill(with: value)
                }
            }
        }
        executor.idle()
        #expect(runs.value == 0, "no step runs before the fill")
        #expect(handled.value == 0)

        root.fill(with: 0)
        let settled = executor.settle { handled.value > 0 && live.value == 0 }
        executor.idle()
        #expect(settled, "the handler ran and every closure was released")
        #expect(handled.value == 1)
        #expect(runs.value == kind.steps(depth: Self.shallow))
        #expect(delivered.peek() == kind.tail(depth: Self.shallow))
        #expect(live.value == 0)
        withExtendedLifetime((root, tail)) {}
    }

    /// Guarantee 5: on every executor, an unfilled chain that nobody references any more is
    /// released with its handlers and their captures: no stage keeps another alive.
    ///
    /// A `timeout` stage's limit keeps its result, by design, until it passes (then delivers the
    /// substitute); the limit here is short, and virtual clocks are moved past it.
    @Test(arguments: FutureKind.allCases, ExecutorKind.allCases)
    func anUnfilledChainThatNobodyReferencesIsReleased(_ kind: FutureKind, _ executorKind: ExecutorKind) async {
        let live = LiveCount()
        let executor = executorKind.make()
        do {
            let probe = StageProbe(live)
            let root = Deferred<Int>()  // Held to the end, so the whole chain is released at once.
            var tail = Future(root)
            for _ in 0..<Self.shallow {
                tail = kind.stage(after: tail, on: executor, probe: probe, limit: .milliseconds(5))
            }
            let tracked = LifetimeTracked(live)
            tail.upon(executor.executor) { _ in _ = tracked }
            withExtendedLifetime(root) {}
        }
        let released = executor.settleAsTimePasses { live.value == 0 }
        #expect(released)
    }
}
