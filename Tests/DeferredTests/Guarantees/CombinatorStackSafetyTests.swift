import Deferred
import TestSupport
import Testing

/// Guarantee 4 for every way of deriving a future (``FutureKind``): a chain of one kind, as deep
/// as the test size says (20,000 stages quick, 1,000,000 at full size; see ``TestSize``; a recipe
/// runs at the quick size, see ``FutureKind/deepChainSize``), fills and is released without
/// overflowing the stack of ``onDeepStack(_:size:_:)``.
///
/// The chains run on the immediate executor, the one that would recurse, with delays and limits
/// on a virtual clock. The other guarantees of each kind, on every executor, are in
/// ``CombinatorGuaranteeTests``.
@Suite(.skippedUnderThreadSanitizer) struct CombinatorStackSafetyTests {
    /// Guarantee 4: a chain of ``TestSize/depth`` stages of one kind fills without overflowing the stack,
    /// and each step runs once.
    @Test(arguments: FutureKind.allCases)
    func aDeepChainFills(_ kind: FutureKind) async {
        let depth = kind.deepChainSize.depth
        let (tail, runs) = await onDeepStack("\(kind) chain, filled", size: kind.deepChainSize) {
            let executor = ExecutorKind.immediate.make()
            let probe = StageProbe(LiveCount())
            let root = Deferred<Int>()
            var tail = Future(root)
            for _ in 0..<depth {
                tail = kind.stage(after: tail, on: executor, probe: probe)
            }
            root.fill(with: 0)
            executor.settle { tail.isFilled }
            return (tail.peek(), probe.runs.value)
        }
        #expect(tail == kind.tail(depth: depth))
        #expect(runs == kind.steps(depth: depth))
    }

    /// Guarantees 4 and 5: dropping an unfilled chain of ``TestSize/depth`` stages releases every stage
    /// and the handler at its end, with a loop rather than a recursion.
    @Test(arguments: FutureKind.allCases)
    func droppingADeepUnfilledChainReleasesIt(_ kind: FutureKind) async {
        let live = LiveCount()
        let depth = kind.deepChainSize.depth
        await onDeepStack("\(kind) chain, dropped", size: kind.deepChainSize) {
            let executor = ExecutorKind.immediate.make()
            let probe = StageProbe(live)
            let root = Deferred<Int>()  // Held to the end, so the whole chain is released at once.
            var tail = Future(root)
            for _ in 0..<depth {
                tail = kind.stage(after: tail, on: executor, probe: probe)
            }
            let tracked = LifetimeTracked(live)
            tail.upon(executor.executor) { _ in _ = tracked }
            withExtendedLifetime(root) {}
        }
        #expect(live.value == 0)
    }
}
