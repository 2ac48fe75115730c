import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Deferred

/// The lock-free primitives every layer shares: the update loop, the closable stack and the
/// ticket lock.
@Suite struct AtomicsTests {
    @Test func anUpdateRetriesUntilItsTransitionSticksOrDeclines() {
        let word = Atomic<UInt>(3)
        var calls = 0
        let (observed, updated) = word.update { value in
            calls += 1
            if calls == 1 {
                word.store(5, ordering: .relaxed)  // Another thread, in effect: the store fails.
            }
            return value + 1
        }
        #expect(updated && observed == 5 && word.load(ordering: .relaxed) == 6 && calls == 2)
        let declined = word.update { $0 > 5 ? nil : 0 }
        #expect(!declined.updated && declined.observed == 6)
    }

    @Test func aStackTakesNewestFirstAndRefusesPushesOnceClosed() {
        let live = LiveCount()
        let stack = ClosableStack<TrackedNode>()
        let first = stack.push(TrackedNode(1, live))
        let second = stack.push(TrackedNode(2, live))
        #expect(first == .accepted(wasEmpty: true) && second == .accepted(wasEmpty: false))
        var taken = stack.takeAll()
        let (isEmpty, isClosed) = (stack.takeAll().isEmpty, stack.isClosed)
        #expect(isEmpty && !isClosed)
        var order: [Int] = []
        while let node = taken.popFirst() {
            order.append(node.id)
        }
        #expect(order == [2, 1])
        #expect(live.value == 0, "a taken node is released with its last reference")

        _ = stack.push(TrackedNode(3, live))
        _ = stack.push(TrackedNode(4, live))
        var oldestFirst = stack.takeAll().reversed()
        order = []
        while let node = oldestFirst.popFirst() {
            order.append(node.id)
        }
        #expect(order == [3, 4])

        _ = stack.push(TrackedNode(5, live))
        let (closed, closedAgain) = (stack.close(), stack.close())
        #expect(closed && !closedAgain, "only one close closes")
        let refused = stack.push(TrackedNode(6, live))
        #expect(refused == .closed)
        #expect(live.value == 1, "a refused node is released at once; the pushed one stays")
        var remaining = stack.takeAll()
        #expect(remaining.popFirst()?.id == 5)
        #expect(live.value == 0)
    }

    @Test func aPushBackFailsOnceTheStackIsClosedAndTheCallerKeepsTheNodes() {
        let live = LiveCount()
        let stack = ClosableStack<TrackedNode>()
        _ = stack.push(TrackedNode(1, live))
        var taken = stack.takeAll()
        let node = taken.popFirst()!
        let chain = NodeChain<TrackedNode>(head: RetainedBits.retain(node))
        let pushedBack = stack.pushBack(chain, last: node)
        let closedWith = stack.closeAndTakeAll().head
        #expect(pushedBack && closedWith == chain.head)
        var again = NodeChain<TrackedNode>(head: RetainedBits.retain(node))
        let pushedBackAfterClose = stack.pushBack(again, last: node)
        #expect(!pushedBackAfterClose)
        _ = again.popFirst()
        var closed = NodeChain<TrackedNode>(head: chain.head)
        _ = closed.popFirst()
    }

    @Test func aStackThatIsDroppedReleasesItsNodes() {
        let live = LiveCount()
        do {
            let stack = ClosableStack<TrackedNode>()
            for id in 0..<1_000 {
                _ = stack.push(TrackedNode(id, live))
            }
            #expect(live.value == 1_000)
        }
        #expect(live.value == 0)
    }

    /// A pusher races a thread that empties the stack and closes it: nothing is lost or taken
    /// twice.
    ///
    /// The taker closes the stack once two of its takes found nodes; every node pushed before
    /// the close is taken exactly once, and every push after it fails. The race runs until both overlaps were seen (takes that found nodes while
    /// pushes went on, and pushes refused by the close), up to 200 times.
    @Test func racingPushesAndTakesLoseNothingAndTakeNothingTwice() {
        let total = 10_000
        var sawBoth = false
        for _ in 0..<200 where !sawBoth {
            let live = LiveCount()
            let stack = ClosableStack<TrackedNode>()
            let (taken, refused, fruitfulTakes, takerStarted) = (Counter(), Counter(), Counter(), Counter())
            // The taker runs on a thread of its own, so the two always overlap, even on a busy
            // machine whose dispatch pool might run them one after the other.
            let takerDone = DispatchSemaphore(value: 0)
            Thread {
                takerStarted.increment()
                while taken.value + refused.value < total {
                    var nodes = stack.takeAll()
                    if !nodes.isEmpty { fruitfulTakes.increment() }
                    while nodes.popFirst() != nil { taken.increment() }
                    if fruitfulTakes.value >= 2 { stack.close() }
                }
                takerDone.signal()
            }.start()
            while takerStarted.value == 0 {}
            for id in 0..<total where stack.push(TrackedNode(id, live)) == .closed {
                refused.increment()
            }
            takerDone.wait()
            #expect(taken.value + refused.value == total)
            #expect(live.value == 0)
            sawBoth = fruitfulTakes.value >= 2 && refused.value > 0
        }
        #expect(sawBoth, "takes overlapped pushes, and the close refused some")
    }
}

/// A stack node that counts itself alive.
private final class TrackedNode: StackNode {
    let id: Int
    let tracked: LifetimeTracked
    var next: UInt = 0

    init(_ id: Int, _ live: LiveCount) {
        self.id = id
        tracked = LifetimeTracked(live)
    }
}
