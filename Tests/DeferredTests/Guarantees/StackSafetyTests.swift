import Deferred
import Dispatch
import Foundation
import TestSupport
import Testing

/// Guarantee 4: stack safety, for the shapes that are not a chain of one kind (those are in
/// ``CombinatorStackSafetyTests``).
///
/// Chains and fan-outs of any depth fill, and are released, without overflowing the stack.
/// A recursive implementation crashes at these depths: 20,000 levels on a 160 KiB stack, or
/// 1,000,000 on 8 MiB at full size (see ``TestSize``, and ``StackSafetyCalibrationTests`` for the
/// proof that recursions crash there). Each test runs on a thread of its own (see
/// ``onDeepStack(_:size:_:)``) and prints its time.
@Suite(.skippedUnderThreadSanitizer) struct StackSafetyTests {
    static let depth = TestSize.current.depth

    @Test func aChainOfAndThensOverFuturesFilledLaterFills() async {
        let (tail, expected) = await onDeepStack("andThen chain over futures filled later") {
            let root = Deferred<Int>()
            var tail = Future(root)
            var steps: [Deferred<Int>] = []
            for _ in 0..<Self.depth {
                let step = Deferred<Int>()
                steps.append(step)
                tail = tail.andThen(upon: .immediate) { _ in step }
            }
            root.fill(with: 0)
            // Filling the last step first completes the whole chain at once when the others follow.
            for (index, step) in steps.enumerated().reversed() {
                step.fill(with: index)
            }
            return (tail.peek(), steps.count - 1)
        }
        #expect(tail == expected)
    }

    /// A chain whose links sit in handler chunks fills, each handler once.
    ///
    /// Each stage gets a handler before the next stage, so the handler takes the inline slot and
    /// the link goes to a chunk; the fill runs through the chunks without a recursion.
    @Test func aDeepChainWithAHandlerBeforeEachLinkFills() async {
        let (ran, tail) = await onDeepStack("map chain with a handler before each link, filled") {
            let root = Deferred<Int>()
            let ran = Counter()
            var tail = Future(root)
            for _ in 0..<Self.depth {
                tail.upon(.immediate) { _ in ran.increment() }
                tail = tail.map(upon: .immediate) { $0 + 1 }
            }
            root.fill(with: 0)
            return (ran.value, tail.peek())
        }
        #expect(ran == Self.depth)
        #expect(tail == Self.depth)
    }

    /// The same chain dropped unfilled: its links are released from the chunks with a loop.
    @Test func droppingAnUnfilledDeepChainWithAHandlerBeforeEachLinkReleasesIt() async {
        let live = LiveCount()
        await onDeepStack("map chain with a handler before each link, dropped") {
            let root = Deferred<Int>()  // Held to the end, so the whole chain is released at once.
            let tracked = LifetimeTracked(live)
            var tail = Future(root)
            for _ in 0..<Self.depth {
                tail.upon(.immediate) { _ in _ = tracked }
                tail = tail.map(upon: .immediate) { $0 + 1 }
            }
            withExtendedLifetime(root) {}
        }
        #expect(live.value == 0)
    }

    @Test func aWideFanOutOfHandlersOnOneFutureRuns() async {
        let ran = await onDeepStack("handler fan-out, filled") {
            let deferred = Deferred<Int>()
            let ran = Counter()
            for _ in 0..<Self.depth {
                deferred.upon(.immediate) { _ in ran.increment() }
            }
            deferred.fill(with: 1)
            return ran.value
        }
        #expect(ran == Self.depth)
    }

    @Test func droppingAnUnfilledFutureWithAWideFanOutOfHandlersReleasesThem() async {
        let live = LiveCount()
        await onDeepStack("handler fan-out, dropped") {
            let deferred = Deferred<Int>()
            let tracked = LifetimeTracked(live)
            for _ in 0..<Self.depth {
                deferred.upon(.immediate) { _ in _ = tracked }
            }
        }
        #expect(live.value == 0)
    }

    @Test func aDeepChainOfLazyMapsOverEveryFills() async {
        let (delivered, read) = await onDeepStack("every over every, filled") {
            let root = Deferred<Int>()
            var tail = root.lazy.map { $0 }
            for _ in 0..<Self.depth {
                tail = tail.lazy.map { $0 + 1 }
            }
            let filled = Deferred<Int>()
            tail.upon(.immediate) { filled.fill(with: $0) }
            root.fill(with: 0)
            return (filled.peek(), tail.peek())
        }
        #expect(delivered == Self.depth)
        #expect(read == Self.depth, "every read applies the whole chain again")
    }

    @Test func droppingAnUnfilledDeepChainOfLazyMapsReleasesIt() async {
        let live = LiveCount()
        await onDeepStack("every over every, dropped") {
            let tracked = LifetimeTracked(live)
            let root = Deferred<Int>()
            var tail = root.lazy.map { [tracked] value in withExtendedLifetime(tracked) { value } }
            for _ in 0..<Self.depth {
                tail = tail.lazy.map { $0 }
            }
            tail.upon(.immediate) { _ in }
        }
        #expect(live.value == 0, "the first step's captures were released with the chain")
    }

    @Test func aDeepChainOfLazyMapsEachErasedToAFutureFillsAndIsReleased() async {
        let live = LiveCount()
        let (tail, joined) = await onDeepStack("erased every chain, filled and dropped") {
            let root = Deferred<Int>()
            var tail = Future(root)
            for _ in 0..<Self.depth {
                tail = tail.lazy.map { $0 + 1 }.eraseToFuture()
            }
            let joined = [tail].allFilled()
            root.fill(with: 0)
            do {
                var unfilled = Future(Deferred<Int>())
                for _ in 0..<Self.depth {
                    unfilled = unfilled.lazy.map { $0 }.eraseToFuture()
                }
                let tracked = LifetimeTracked(live)
                unfilled.upon(.immediate) { _ in _ = tracked }
            }
            return (tail.peek(), joined.peek())
        }
        #expect(tail == Self.depth)
        #expect(joined == [Self.depth])
        #expect(live.value == 0)
    }

    @Test func aDeepChainOfIgnoringViewsFills() async {
        let filled = await onDeepStack("ignoring-view chain, filled") {
            let root = Deferred<Int>()
            var tail = root.ignored().eraseToFuture()
            for _ in 0..<Self.depth {
                tail = [tail.ignored()].allFilled().ignored().eraseToFuture()
            }
            root.fill(with: 0)
            return tail.isFilled
        }
        #expect(filled)
    }

    @Test func droppingAnUnfilledDeepChainOfIgnoringViewsReleasesIt() async {
        let live = LiveCount()
        await onDeepStack("ignoring-view chain, dropped") {
            var tail = Deferred<Int>().ignored().eraseToFuture()
            for _ in 0..<Self.depth {
                tail = [tail.ignored()].allFilled().ignored().eraseToFuture()
            }
            let tracked = LifetimeTracked(live)
            tail.upon(.immediate) { _ in _ = tracked }
        }
        #expect(live.value == 0)
    }

    @Test func aWideFanOutOfMapsFromOneFutureFillsAndIsReleased() async {
        let live = LiveCount()
        let (unfilledBefore, last, filled, liveAfterFill) = await onDeepStack("map fan-out, filled and dropped") {
            let root = Deferred<Int>()
            let filled = Counter()
            var unfilledBefore: Int?
            var last: Int?
            do {
                let tracked = LifetimeTracked(live)
                let mapped = (0..<Self.depth).map { offset in
                    root.map(upon: .immediate) { [tracked] value in withExtendedLifetime(tracked) { value + offset } }
                }
                for future in mapped {
                    future.upon(.immediate) { _ in filled.increment() }
                }
                unfilledBefore = mapped.last?.peek()
                root.fill(with: 1)
                last = mapped.last?.peek()
            }
            let liveAfterFill = live.value
            do {
                let unfilled = Deferred<Int>()
                let tracked = LifetimeTracked(live)
                for _ in 0..<Self.depth {
                    unfilled.map(upon: .immediate) { [tracked] value in withExtendedLifetime(tracked) { value } }
                        .upon(.immediate) { _ in }
                }
            }
            return (unfilledBefore, last, filled.value, liveAfterFill)
        }
        #expect(unfilledBefore == nil)
        #expect(last == Self.depth)
        #expect(filled == Self.depth)
        #expect(liveAfterFill == 0)
        #expect(live.value == 0, "an unfilled fan-out is released with its source")
    }
}
