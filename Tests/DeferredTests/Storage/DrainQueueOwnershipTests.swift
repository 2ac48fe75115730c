import Dispatch
import TestSupport
import Testing

@testable import Deferred

/// A link step that completes its own node hands the reference its handler held to the drain
/// queue (`DrainQueue.runStep`), instead of the queue retaining the node: every stage must still
/// be released exactly when nothing else holds it, whether its step parked it or not.
@Suite struct DrainQueueOwnershipTests {
    /// Weak references to the storages of a chain's stages.
    final class Stages {
        private var references: [() -> AnyObject?] = []

        func watch(_ future: Future<Int>) {
            guard case .storage(let storage) = future.source else {
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
}
