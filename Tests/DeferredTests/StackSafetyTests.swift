import Deferred
import Dispatch
import Foundation
import TestSupport
import Testing

/// Guarantee 4: stack safety.
///
/// Chains and fan-outs of any depth fill, and are released, without overflowing the stack.
/// A recursive implementation crashes at these depths.
@Suite struct StackSafetyTests {
    static let depth = 1_000_000

    @Test func aMillionMapsOnTheImmediateExecutorFill() {
        let root = Deferred<Int>()
        var tail = Future(root)
        for _ in 0..<Self.depth {
            tail = tail.map(upon: .immediate) { $0 + 1 }
        }
        root.fill(with: 0)
        #expect(tail.peek() == Self.depth)
    }

    @Test func aMillionAndThensOnTheImmediateExecutorFill() {
        let root = Deferred<Int>()
        var tail = Future(root)
        for _ in 0..<Self.depth {
            tail = tail.andThen(upon: .immediate) { Future(value: $0 + 1) }
        }
        root.fill(with: 0)
        #expect(tail.peek() == Self.depth)
    }

    @Test func aChainOfAndThensOverFuturesFilledLaterFills() {
        let root = Deferred<Int>()
        var tail = Future(root)
        var steps: [Deferred<Int>] = []
        for _ in 0..<Self.depth / 10 {
            let step = Deferred<Int>()
            steps.append(step)
            tail = tail.andThen(upon: .immediate) { _ in step }
        }
        root.fill(with: 0)
        // Filling the last step first completes the whole chain at once when the others follow.
        for (index, step) in steps.enumerated().reversed() {
            step.fill(with: index)
        }
        #expect(tail.peek() == steps.count - 1)
    }

    @Test func aMillionHandlersOnOneFutureRun() {
        let deferred = Deferred<Int>()
        let ran = Counter()
        for _ in 0..<Self.depth {
            deferred.upon(.immediate) { _ in ran.increment() }
        }
        deferred.fill(with: 1)
        #expect(ran.value == Self.depth)
    }

    @Test func droppingAnUnfilledChainOfAMillionMapsReleasesIt() {
        let live = LiveCount()
        do {
            let root = Deferred<Int>()
            var tail = Future(root)
            for _ in 0..<Self.depth {
                tail = tail.map(upon: .immediate) { $0 + 1 }
            }
            let tracked = LifetimeTracked(live)
            tail.upon(.immediate) { _ in _ = tracked }
        }
        #expect(live.value == 0, "the handler at the end of the chain was released")
    }

    @Test func droppingAnUnfilledChainOfAMillionAndThensReleasesIt() {
        let live = LiveCount()
        do {
            let root = Deferred<Int>()
            var tail = Future(root)
            for _ in 0..<Self.depth {
                tail = tail.andThen(upon: .immediate) { Future(value: $0) }
            }
            let tracked = LifetimeTracked(live)
            tail.upon(.immediate) { _ in _ = tracked }
        }
        #expect(live.value == 0)
    }

    @Test func droppingAnUnfilledFutureWithAMillionHandlersReleasesThem() {
        let live = LiveCount()
        do {
            let deferred = Deferred<Int>()
            let tracked = LifetimeTracked(live)
            for _ in 0..<Self.depth {
                deferred.upon(.immediate) { _ in _ = tracked }
            }
        }
        #expect(live.value == 0)
    }

    @Test func aDeepChainOfAllFilledJoinsFillsAndIsReleased() {
        let root = Deferred<Int>()
        var tail = Future(root)
        for _ in 0..<Self.depth / 10 {
            tail = [tail].allFilled().map(upon: .immediate) { $0[0] + 1 }
        }
        root.fill(with: 0)
        #expect(tail.peek() == Self.depth / 10)
        let live = LiveCount()
        do {
            var unfilled = Future(Deferred<Int>())
            for _ in 0..<Self.depth / 10 {
                unfilled = [unfilled].allFilled().map(upon: .immediate) { $0[0] }
            }
            let tracked = LifetimeTracked(live)
            unfilled.upon(.immediate) { _ in _ = tracked }
        }
        #expect(live.value == 0)
    }
}
