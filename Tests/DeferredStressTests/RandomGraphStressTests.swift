import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import TestSupport
import Testing

extension StressSuites {
    /// Random graphs of futures over random executors, each checked against a plain sequential
    /// model of the same graph.
    ///
    /// A seeded generator builds each graph from `map`, `andThen`, `lazy.map`, `and`, `allFilled` and
    /// `firstFilled`, and fills its roots in a random order from random threads while the graph is
    /// still being built. Every node must end with the value the model computes. The seed is
    /// printed; `DEFERRED_STRESS_SEED=<seed>` replays the same graphs.
    @Suite struct RandomGraphStressTests {
        @Test(.timeLimit(.minutes(10)))
        func everyNodeOfARandomGraphGetsTheValueOfTheSequentialModel() {
            let seed = TestSize.seed
            let count = TestSize.current.graphs
            progress("random graphs: \(count) graphs from seed \(seed) (replay with DEFERRED_STRESS_SEED=\(seed))")
            let pool = ExecutorPool()
            var (nodes, failed) = (0, 0)
            for index in 0..<count {
                var random = SplitMix(seed: seed &+ UInt64(index))
                let graph = RandomGraph(random: &random, pool: pool)
                nodes += graph.futures.count
                let failures = graph.check()
                if !failures.isEmpty {
                    failed += 1
                    let report = failures + ["the graph:"] + graph.descriptions
                    let heading = "graph \(index) from seed \(seed) (replay with DEFERRED_STRESS_SEED=\(seed)):"
                    Issue.record(Comment(rawValue: ([heading] + report).joined(separator: "\n")))
                }
            }
            progress("random graphs: \(nodes) nodes in \(count) graphs; \(count - failed) graphs agree with the model")
            #expect(pool.thread.shutdown().wait(until: .now() + 10) != nil)
        }
    }
}

/// The executors a random graph picks from, each with a name for failure reports.
private struct ExecutorPool {
    let thread = ThreadExecutor(name: "random graphs")
    let all: [(name: String, executor: any Executor)]

    init() {
        let operations = OperationQueue()
        operations.maxConcurrentOperationCount = 3
        all = [
            ("immediate", ImmediateExecutor.immediate),
            ("serial queue", DispatchQueue(label: "random graphs")),
            ("concurrent queue", DispatchQueue.global()),
            ("operation queue", operations),
            ("thread executor", thread),
        ]
    }

    func pick(_ random: inout SplitMix) -> (name: String, executor: any Executor) {
        all[Int(random.next() % UInt64(all.count))]
    }
}

/// One random graph, built and run: its futures, the values a sequential model gives them, and
/// a line describing each node.
private struct RandomGraph {
    private(set) var futures: [Future<Int>] = []
    private(set) var model: [Int] = []
    private(set) var descriptions: [String] = []
    private var unfilled: [(deferred: Deferred<Int>, value: Int)] = []

    init(random: inout SplitMix, pool: ExecutorPool) {
        for _ in 0..<1 + Int(random.next() % 4) {
            addRoot(random: &random)
        }
        for _ in 0..<8 + Int(random.next() % 48) {
            addNode(random: &random, pool: pool)
            if random.next() % 8 == 0 {
                fillARoot(random: &random, pool: pool)
            }
        }
        while !unfilled.isEmpty {
            fillARoot(random: &random, pool: pool)
        }
    }

    /// Waits for every node and returns a line for each one whose value is not the model's.
    func check() -> [String] {
        let values = futures.allFilled().wait(until: .now() + 60)
        guard let values else {
            let pending = futures.indices.filter { !futures[$0].isFilled }.map { "n\($0)" }
            return ["nodes still unfilled after 60 s: \(pending.joined(separator: ", "))"]
        }
        return values.indices.compactMap { index in
            values[index] == model[index] ? nil : "n\(index) is \(values[index]), the model says \(model[index])"
        }
    }

    private mutating func addRoot(random: inout SplitMix) {
        let deferred = Deferred<Int>()
        let value = Int(truncatingIfNeeded: random.next() % 1_000)
        unfilled.append((deferred, value))
        add(Future(deferred), model: value, "root \(value)")
    }

    private mutating func fillARoot(random: inout SplitMix, pool: ExecutorPool) {
        guard !unfilled.isEmpty else { return }
        let (deferred, value) = unfilled.remove(at: Int(random.next() % UInt64(unfilled.count)))
        let (name, executor) = pool.pick(&random)
        descriptions.append("  (fill root with \(value) on \(name))")
        executor.submit { deferred.mustFill(with: value) }
    }

    private mutating func addNode(random: inout SplitMix, pool: ExecutorPool) {
        let operand = pickNode(&random)
        let (input, value) = (futures[operand], model[operand])
        let constant = Int(random.next() % 100)
        let (name, executor) = pool.pick(&random)
        switch random.next() % 6 {
        case 0:
            add(
                input.map(upon: executor) { $0 &* 3 &+ constant }, model: value &* 3 &+ constant,
                "map(n\(operand)) { $0 * 3 + \(constant) } on \(name)")
        case 1:
            let (innerName, inner) = pool.pick(&random)
            let later = random.next() % 2 == 0
            add(
                input.andThen(upon: executor) { value in
                    guard later else { return Future(filledWith: value &+ constant) }
                    let next = Deferred<Int>()
                    inner.submit { next.fill(with: value &+ constant) }
                    return Future(next)
                }, model: value &+ constant,
                "andThen(n\(operand)) { $0 + \(constant)\(later ? ", filled on \(innerName)" : "") } on \(name)")
        case 2:
            add(
                input.lazy.map { $0 ^ constant }.eraseToFuture(), model: value ^ constant,
                "every(n\(operand)) { $0 ^ \(constant) }")
        case 3:
            let other = pickNode(&random)
            let pair: Future<(Int, Int)> = input.and(futures[other])
            add(
                pair.lazy.map { first, second in first &* 31 &+ second }.eraseToFuture(),
                model: value &* 31 &+ model[other], "and(n\(operand), n\(other))")
        case 4:
            let operands = [operand] + (0..<Int(random.next() % 4)).map { _ in pickNode(&random) }
            add(
                operands.map { futures[$0] }.allFilled().lazy.map { $0.reduce(0, &+) }.eraseToFuture(),
                model: operands.map { model[$0] }.reduce(0, &+),
                "allFilled(\(operands.map { "n\($0)" }.joined(separator: ", "))) summed")
        default:
            // Paths that all compute the operand's value, so whichever fills first, the value is known.
            let paths = [input, input.map(upon: executor) { $0 }, input.lazy.map { $0 }.eraseToFuture()]
            add(paths.firstFilled(), model: value, "firstFilled(n\(operand) and copies of it, one on \(name))")
        }
    }

    /// A node to build on: half the time one of the last few, so that graphs grow deep.
    private func pickNode(_ random: inout SplitMix) -> Int {
        let recent = random.next() % 2 == 0
        let range = recent ? max(0, futures.count - 4)..<futures.count : 0..<futures.count
        return range.lowerBound + Int(random.next() % UInt64(range.count))
    }

    private mutating func add(_ future: Future<Int>, model value: Int, _ description: String) {
        descriptions.append("n\(futures.count) = \(description), model \(value)")
        futures.append(future)
        model.append(value)
    }
}
