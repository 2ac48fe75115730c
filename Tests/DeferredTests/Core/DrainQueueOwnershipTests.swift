import Dispatch
import TestSupport
import Testing

@testable import Deferred

/// A link step that completes its own node hands the reference its handler held to the drain
/// queue (`DrainQueue.runStep`), instead of the queue retaining the node: every stage must still
/// be released exactly when nothing else holds it, whether its step parked it or not, and also
/// where steps nest (a step that follows a filled future, a queue that is not running yet).
@Suite struct DrainQueueOwnershipTests {
    /// Weak references to the storages of a chain's stages.
    final class Stages {
        private var references: [() -> AnyObject?] = []

        func watch<Value>(_ future: Future<Value>) {
            guard case .storage(let storage) = future.backing else {
                Issue.record("the stage has no storage")
                return
            }
            references.append { [weak storage] in storage }
        }

        func watch(_ attempt: Attempt<Int, TestError>) {
            references.append { [weak node = attempt.node] in node }
        }

        var alive: Int {
            references.count { $0() != nil }
        }
    }

    @Test(arguments: [1, 2, 50])
    func everyStageOfAFilledFutureChainIsReleased(length: Int) {
        let stages = Stages()
        let root = Deferred<Int>()
        do {
            var held = [Future(root)]
            for _ in 0..<length {
                held.append(held.last!.map(upon: .immediate) { $0 + 1 })
            }
            // A join of the tail and a branch: the join's steps park a node other than their own.
            let joined = [held.last!, held.last!.map(upon: .immediate) { $0 * 2 }].allFilled()
            held.append(joined.map(upon: .immediate) { $0.reduce(0, +) })
            held.dropFirst().forEach(stages.watch)
            root.fill(with: 0)
            #expect(held.map { $0.peek() } == Array(0...length) + [length * 3])
            #expect(stages.alive == length + 1, "the caller still holds every stage")
        }
        #expect(stages.alive == 0, "no stage outlives its last reference")
    }

    @Test func aStageFilledThroughAnExecutorIsReleased() {
        let stages = Stages()
        let root = Deferred<Int>()
        let queue = DispatchQueue(label: "DrainQueueOwnershipTests")
        do {
            let tail = Future(root).map(upon: .immediate) { $0 + 1 }.map(upon: queue) { $0 + 1 }
                .map(upon: .immediate) { $0 + 1 }
            stages.watch(tail)
            root.fill(with: 0)
            #expect(tail.wait(until: .now() + .seconds(30)) == 3)
        }
        queue.sync {}
        #expect(stages.alive == 0)
    }

    @Test(arguments: [1, 2, 50])
    func everyStageOfADecidedAttemptChainIsReleased(length: Int) {
        let stages = Stages()
        let root = DeferredAttempt<Int, TestError>()
        do {
            var held = [root.attempt]
            for index in 0..<length {
                let last = held.last!
                held.append(
                    index.isMultiple(of: 2)
                        ? last.map(upon: .immediate) { $0 + 1 }
                        : last.recover(upon: .immediate) { _ in 0 }.map(upon: .immediate) { $0 + 1 })
            }
            held.dropFirst().forEach(stages.watch)
            root.succeed(with: 0)
            #expect(held.map { try? $0.peek()?.get() } == Array(0...length))
            #expect(stages.alive == length, "the caller still holds every stage")
        }
        #expect(stages.alive == 0)
    }

    /// An `andThen` whose inner future is filled already runs the inner link's step inside its
    /// own: two steps on one queue, nested, for the same stage, which only handlers hold.
    @Test(arguments: [false, true])
    func aStageFollowingAFilledFutureIsReleased(withDownstream: Bool) {
        let stages = Stages()
        let live = LiveCount()
        let root = Deferred<Int>()
        let seen = Deferred<Int>()
        do {
            let tracked = LifetimeTracked(live)
            let followed = Future(root).andThen(upon: .immediate) { [tracked] value in
                withExtendedLifetime(tracked) { Future(filledWith: value + 1) }
            }
            stages.watch(followed)
            if withDownstream {
                let tail = followed.map(upon: .immediate) { $0 * 10 }
                    .andThen(upon: .immediate) { Future(Deferred(filledWith: $0 + 1)) }
                stages.watch(tail)
                tail.upon(.immediate) { seen.fill(with: $0) }
            }
        }
        #expect(root.fill(with: 1) == true)
        #expect(seen.peek() == (withDownstream ? 21 : nil))
        #expect(live.value == 0)
        #expect(stages.alive == 0)
    }

    /// A stage filled on an executor starts a drain of its own: the stages it completes run
    /// their handlers in place, each a step nested in the one before, and none is held by the
    /// caller.
    @Test func stagesCompletedByAStageOnAnExecutorAreReleased() {
        let stages = Stages()
        let root = Deferred<Int>()
        let queue = DispatchQueue(label: "DrainQueueOwnershipTests.nested")
        let seen = Deferred<[Int]>()
        do {
            var tail = Future(root)
            for _ in 0..<8 {
                tail = tail.andThen(upon: queue) { Future(filledWith: $0 + 1) }.map(upon: .immediate) { $0 + 1 }
                stages.watch(tail)
            }
            let joined = [tail, tail.map(upon: .immediate) { $0 * 2 }].allFilled()
            stages.watch(joined)
            joined.upon(.immediate) { seen.fill(with: $0) }
        }
        root.fill(with: 0)
        #expect(seen.wait(until: .now() + .seconds(30)) == [16, 32])
        queue.sync {}
        #expect(stages.alive == 0)
    }
}
