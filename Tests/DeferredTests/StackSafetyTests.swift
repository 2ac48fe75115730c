import Deferred
import Dispatch
import Foundation
import TestSupport
import Testing

/// Guarantee 4: stack safety.
///
/// Chains and fan-outs of any depth fill, and are released, without overflowing the stack.
/// A recursive implementation crashes at these depths. The depth is 1,000,000 unless
/// `DEFERRED_STRESS_DEPTH` says otherwise (CI runs a smaller depth under ThreadSanitizer).
@Suite struct StackSafetyTests {
    static let depth = Stress.depth

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

    @Test func aChainOfAMillionAllFilledJoinsFills() {
        let root = Deferred<Int>()
        var tail = Future(root)
        for _ in 0..<Self.depth {
            tail = [tail, Future(value: 1)].allFilled().every { $0[0] + $0[1] }.eraseToFuture()
        }
        root.fill(with: 0)
        #expect(tail.peek() == Self.depth)
    }

    @Test func droppingAnUnfilledChainOfAMillionAllFilledJoinsReleasesIt() {
        let live = LiveCount()
        do {
            var tail = Future(Deferred<Int>())
            for _ in 0..<Self.depth {
                tail = [tail].allFilled().map(upon: .immediate) { $0[0] }
            }
            let tracked = LifetimeTracked(live)
            tail.upon(.immediate) { _ in _ = tracked }
        }
        #expect(live.value == 0)
    }

    @Test func aMillionEverysOverEveryFill() {
        let root = Deferred<Int>()
        var tail = root.every { $0 }
        for _ in 0..<Self.depth {
            tail = tail.every { $0 + 1 }
        }
        let filled = Deferred<Int>()
        tail.upon(.immediate) { filled.fill(with: $0) }
        root.fill(with: 0)
        #expect(filled.peek() == Self.depth)
        #expect(tail.peek() == Self.depth, "every read applies the whole chain again")
    }

    @Test func droppingAnUnfilledChainOfAMillionEverysReleasesIt() {
        let live = LiveCount()
        do {
            let tracked = LifetimeTracked(live)
            let root = Deferred<Int>()
            var tail = root.every { [tracked] value in withExtendedLifetime(tracked) { value } }
            for _ in 0..<Self.depth {
                tail = tail.every { $0 }
            }
            tail.upon(.immediate) { _ in }
        }
        #expect(live.value == 0, "the first step's captures were released with the chain")
    }

    @Test func aMillionEverysEachErasedToAFutureFillAndAreReleased() {
        let root = Deferred<Int>()
        var tail = Future(root)
        for _ in 0..<Self.depth {
            tail = tail.every { $0 + 1 }.eraseToFuture()
        }
        let joined = [tail].allFilled()
        root.fill(with: 0)
        #expect(tail.peek() == Self.depth)
        #expect(joined.peek() == [Self.depth])
        let live = LiveCount()
        do {
            var unfilled = Future(Deferred<Int>())
            for _ in 0..<Self.depth {
                unfilled = unfilled.every { $0 }.eraseToFuture()
            }
            let tracked = LifetimeTracked(live)
            unfilled.upon(.immediate) { _ in _ = tracked }
        }
        #expect(live.value == 0)
    }

    @Test func aChainOfAMillionIgnoringViewsFills() {
        let root = Deferred<Int>()
        var tail = root.ignored().eraseToFuture()
        for _ in 0..<Self.depth {
            tail = [tail.ignored()].allFilled().ignored().eraseToFuture()
        }
        root.fill(with: 0)
        #expect(tail.peek() != nil)
    }

    @Test func droppingAnUnfilledChainOfAMillionIgnoringViewsReleasesIt() {
        let live = LiveCount()
        do {
            var tail = Deferred<Int>().ignored().eraseToFuture()
            for _ in 0..<Self.depth {
                tail = [tail.ignored()].allFilled().ignored().eraseToFuture()
            }
            let tracked = LifetimeTracked(live)
            tail.upon(.immediate) { _ in _ = tracked }
        }
        #expect(live.value == 0)
    }

    @Test func aFanOutOfAMillionMapsFromOneFutureFillsAndIsReleased() {
        let root = Deferred<Int>()
        let filled = Counter()
        let live = LiveCount()
        do {
            let tracked = LifetimeTracked(live)
            let mapped = (0..<Self.depth).map { offset in
                root.map(upon: .immediate) { [tracked] value in withExtendedLifetime(tracked) { value + offset } }
            }
            for future in mapped {
                future.upon(.immediate) { _ in filled.increment() }
            }
            #expect(mapped.last?.peek() == nil)
            root.fill(with: 1)
            #expect(mapped.last?.peek() == Self.depth)
        }
        #expect(filled.value == Self.depth)
        #expect(live.value == 0)
        do {
            let unfilled = Deferred<Int>()
            let tracked = LifetimeTracked(live)
            for _ in 0..<Self.depth {
                unfilled.map(upon: .immediate) { [tracked] value in withExtendedLifetime(tracked) { value } }
                    .upon(.immediate) { _ in }
            }
        }
        #expect(live.value == 0, "an unfilled fan-out is released with its source")
    }
}
