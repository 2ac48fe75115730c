import Deferred
import Dispatch
import Foundation
import TestSupport
import Testing

/// Guarantees 2 and 5 for every way of deriving a future (``FutureKind``), on every kind of
/// executor (``ExecutorKind``).
///
/// One parameterized test per guarantee, so a combinator or an executor that breaks one shows
/// up by name. Guarantee 4 for each kind, on chains as deep as the test size says, is in
/// ``CombinatorStackSafetyTests``.
@Suite struct CombinatorGuaranteeTests {
    static let shallow = 20

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
