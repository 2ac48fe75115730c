import DeferredExecutors
import Dispatch
import TestSupport
import Testing

@testable import Deferred

/// "What is it waiting on, for whom, since when": a pending future's whole chain in one dump.
///
/// And the lints. Each test finds its own chains by a label or a place of its own, since other tests
/// record at the same time.
@Suite struct PendingChainTests {
    /// The chains of the dump that start at a writer or stage named `label`.
    private func chains(labelled label: String) -> [PendingChain] {
        PendingFutures.snapshotDump.chains.filter { chain in chain.links.contains { $0.label == label } }
    }

    /// Waits until the dump has a chain labelled `label` that ends at a waiter of `kind`.
    private func awaitWaiter(_ kind: PendingLink.Kind, labelled label: String) async -> PendingChain? {
        for _ in 0..<2_000 {
            if let chain = chains(labelled: label).first(where: { $0.waiter?.kind == kind }) {
                return chain
            }
            await Task.yield()
            try? await Task.sleep(for: .milliseconds(1))
        }
        return nil
    }

    @Test func aStuckChainIsDumpedFromItsWriterDownToTheTaskThatAwaitsIt() async throws {
        let line: UInt = #line + 2
        let (_, pending) = try await PendingFutures.madeDuring {
            let profile = Deferred<Int>(named: "profile 42")
            let shown = profile.map(upon: .immediate) { $0 + 1 }.named("shown")
            let task = Task(name: "Load profile") { try await shown.get() }
            let chain = await awaitWaiter(.task, labelled: "profile 42")
            let links = try #require(chain).links
            #expect(links.map(\.kind) == [.writer, .stage, .task])
            #expect(links[0].name == "Deferred<Int>")
            #expect(links[0].place == "DeferredTests/PendingChainTests.swift:\(line)")
            #expect(links[1].name == "map")
            #expect(links[1].label == "shown")
            #expect(links[2].name.hasPrefix("task \"Load profile\" (priority "))
            let text = try #require(chain).description
            #expect(
                text.hasPrefix("Deferred<Int> \"profile 42\" made at DeferredTests/PendingChainTests.swift:\(line), "))
            #expect(text.contains(" ← map \"shown\" ← task \"Load profile\" (priority "))
            let listed = PendingFutures.pendingInScope.first { $0.label == "profile 42" }
            #expect(listed?.chains.map(\.description).contains { $0.contains("← map \"shown\"") } == true)
            profile.fill(with: 1)
            #expect(try await task.value == 2)
            return ()
        }
        #expect(pending.isEmpty)
    }

    @Test func everyReaderOfAWriterMakesAChainOfItsOwn() throws {
        let (writer, _) = PendingFutures.madeDuring {
            let writer = Deferred<String>(named: "two readers")
            writer.upon(DispatchQueue(label: "reader queue")) { _ in }
            _ = writer.map(upon: .immediate) { $0.count }
            return writer
        }
        let found = chains(labelled: "two readers")
        #expect(found.count == 2)
        #expect(found.contains { $0.waiter?.name.hasPrefix("upon on DispatchQueue \"reader queue\"") == true })
        let unread = try #require(found.first { $0.waiter == nil })
        #expect(unread.links.map(\.name) == ["Deferred<String>", "map"])
        #expect(unread.description.hasSuffix("← map, with no reader"))
        writer.fill(with: "done")
        #expect(chains(labelled: "two readers").isEmpty)
    }

    @Test func aBlockedThreadIsAWaiterOfTheChain() async throws {
        let (writer, _) = PendingFutures.madeDuring { Deferred<Int>(named: "blocked") }
        let finished = Deferred<Int>()
        let thread = ThreadExecutor(name: "blocked waiter")
        thread.submit { finished.fill(with: writer.wait(until: .distantFuture) ?? -1) }
        let chain = await awaitWaiter(.thread, labelled: "blocked")
        #expect(try #require(chain).waiter?.name == "thread blocked in wait")
        writer.fill(with: 7)
        #expect(await finished.value == 7)
        thread.shutdown()
    }

    @Test func anAttemptChainShowsItsStagesAndLimit() async throws {
        let writer = HeldWriter<Int, any Error>()
        let (limited, _) = PendingFutures.madeDuring {
            writer.attempt.named("search").map(upon: .immediate) { $0 * 2 }.timeout(
                after: .seconds(3600), upon: DispatchQueue.global()
            )
        }
        limited.uponSuccess(.immediate) { _ in }
        let chain = try #require(chains(labelled: "search").first)
        #expect(chain.links.map(\.name).dropFirst().prefix(2) == ["map", "timeout(3600.0 seconds)"])
        #expect(chain.waiter?.name.hasPrefix("upon on .immediate, from task ") == true)
        writer.succeed(with: 1)
    }

    @Test func aLimitThatPassesWhileItsWorkStillRunsIsALint() async throws {
        var writer: HeldWriter<Int, any Error>?
        let (limited, _) = PendingFutures.madeDuring {
            writer = HeldWriter()  // its producer ignores the cancellation
            return writer!.attempt.named("slow work").timeout(after: .milliseconds(1), upon: DispatchQueue.global())
        }
        #expect(throws: TimeoutError.self) { try limited.wait(until: .distantFuture)?.get() }
        let before = PendingFutures.lintCount(.limitPassedWhileWorkRuns)
        let lint = PendingFutures.snapshotDump.lints.first {
            $0.kind == .limitPassedWhileWorkRuns && $0.message.contains("\"slow work\"")
        }
        #expect(lint?.message.hasPrefix("timeout(0.001 seconds) passed ") == true, "\(PendingFutures.snapshotDump)")
        #expect(
            lint?.message.contains(
                "the work it limits still runs: DeferredAttempt<Int, any Error> \"slow work\" made at ")
                == true)
        #expect(PendingFutures.lintCount(.limitPassedWhileWorkRuns) >= before)
        writer = nil  // the producer is done: the limit's lint goes
        #expect(!PendingFutures.snapshotDump.lints.contains { $0.message.contains("\"slow work\"") })
    }

    @Test func aFutureLimitThatPassesWhileItsSourceIsPendingIsALint() {
        let (writer, _) = PendingFutures.madeDuring { Deferred<Int>(named: "future work") }
        let limited = writer.timeout(after: .milliseconds(1), upon: DispatchQueue.global(), substituting: -1)
        #expect(limited.wait(for: .seconds(60)) == -1)
        let lint = PendingFutures.snapshotDump.lints.first { $0.message.contains("\"future work\"") }
        #expect(lint?.kind == .limitPassedWhileWorkRuns)
        #expect(lint?.message.hasPrefix("timeout(0.001 seconds) passed ") == true)
        writer.fill(with: 1)
        #expect(!PendingFutures.snapshotDump.lints.contains { $0.message.contains("\"future work\"") })
    }

    @Test func aFailureNobodyObservedIsReportedAtItsRelease() {
        let before = PendingFutures.lintCount(.unobservedFailure)
        let line: UInt = #line + 2
        _ = PendingFutures.madeDuring {
            _ = Attempt<Int, any Error>(failedWith: TestError.failed(1))
            let observed = Attempt<Int, any Error>(failedWith: TestError.failed(1))
            _ = observed.peek()
            let handled = Attempt<Int, any Error>(failedWith: TestError.failed(1))
            handled.uponFailure(.immediate) { _ in }
            _ = Attempt<Int, any Error>(succeededWith: 1)
        }
        let reported = PendingFutures.snapshotDump.lints.filter {
            $0.kind == .unobservedFailure && $0.message.contains("PendingChainTests.swift:\(line - 1)")
                || $0.message.contains("PendingChainTests.swift:\(line)")
                || $0.message.contains("PendingChainTests.swift:\(line + 1)")
                || $0.message.contains("PendingChainTests.swift:\(line + 3)")
                || $0.message.contains("PendingChainTests.swift:\(line + 5)")
        }
        #expect(reported.count == 1, "\(reported)")
        #expect(
            reported.first?.message
                == "Attempt<Int, any Error> made at DeferredTests/PendingChainTests.swift:\(line) failed with "
                + "\(TestError.failed(1)) and was released with nobody observing its failure")
        #expect(PendingFutures.lintCount(.unobservedFailure) >= before + 1)
    }

    @Test func aCancelledOrAbandonedAttemptIsNoUnobservedFailure() {
        let line: UInt = #line + 3
        _ = PendingFutures.madeDuring {
            let cancelled = DeferredAttempt<Int, any Error>()
            cancelled.attempt.cancel()
            _ = DeferredAttempt<Int, any Error>()  // abandoned
            let typed = DeferredAttempt<Int, TestError>()
            _ = typed.attempt.map(upon: .immediate) { $0 + 1 }.named("typed chain")
            typed.attempt.cancel()  // the map fails with the cancellation it received
        }
        #expect(!PendingFutures.snapshotDump.lints.contains { $0.message.contains("\"typed chain\"") })
        #expect(
            !PendingFutures.snapshotDump.lints.contains {
                $0.message.contains("PendingChainTests.swift:\(line)")
                    || $0.message.contains("PendingChainTests.swift:\(line + 2)")
            })
    }

    @Test func aDerivedStageThatReceivedTheFailureObservedIt() {
        let line: UInt = #line + 2
        _ = PendingFutures.madeDuring {
            let failed = Attempt<Int, any Error>(failedWith: TestError.failed(1))
            _ = failed.map(upon: .immediate) { $0 + 1 }  // its own failure is what nobody observed
        }
        let lints = PendingFutures.snapshotDump.lints.filter { $0.kind == .unobservedFailure }
        #expect(!lints.contains { $0.message.contains("PendingChainTests.swift:\(line)") })
        #expect(lints.contains { $0.message.hasPrefix("map failed with") })
    }

    @Test func aForgottenWriterBehindASharedRunIsDumpedWithEachCaller() async throws {
        let shared = SharedAttempts<Int, Int, any Error>()
        var work: HeldWriter<Int, any Error>?
        let line: UInt = #line + 3
        let (callers, _) = PendingFutures.madeDuring {
            let first = shared.attempt(for: 7) { _ in
                work = HeldWriter()  // forgotten: nothing fills it
                return work!.attempt.named("search 7")
            }
            let second = shared.attempt(for: 7) { _ in Attempt(failedWith: TestError.failed(2)) }
            return [first, second]
        }
        let tasks = callers.map { caller in Task(name: "caller") { try await caller.get() } }
        for _ in 0..<2_000 where chains(labelled: "search 7").filter({ $0.waiter?.kind == .task }).count < 2 {
            try await Task.sleep(for: .milliseconds(1))
        }
        let found = chains(labelled: "search 7").filter { $0.waiter?.kind == .task }
        #expect(found.count == 2)
        for chain in found {
            #expect(chain.links.map(\.name).prefix(3) == ["DeferredAttempt<Int, any Error>", "shared run", "caller"])
            #expect(chain.source.place == "DeferredTests/PendingChainTests.swift:\(line)")
            #expect(chain.waiter?.name.hasPrefix("task \"caller\"") == true)
        }
        work?.succeed(with: 1)
        for task in tasks {
            #expect(try await task.value == 1)
        }
    }

    @Test func aSharedRunWhoseCallersAllLeftWhileItsWorkRunsIsALint() {
        let shared = SharedAttempts<Int, Int, any Error>()
        var work: HeldWriter<Int, any Error>?
        let caller = PendingFutures.madeDuring {
            work = HeldWriter()  // ignores the cancellation
            return shared.attempt(for: 1) { _ in work!.attempt.named("shared work") }
        }.result
        caller.cancel()
        let lint = PendingFutures.snapshotDump.lints.first {
            $0.kind == .sharedRunWithoutCallers && $0.message.contains("\"shared work\"")
        }
        #expect(lint?.message.hasPrefix("every caller of shared run left ") == true, "\(PendingFutures.snapshotDump)")
        work = nil
    }

    @Test func aWaitLongerThanTheThresholdIsALint() async throws {
        let (writer, _) = PendingFutures.madeDuring { Deferred<Int>(named: "long wait") }
        writer.upon(.immediate) { _ in }
        let threshold = PendingFutures.longWaitThreshold
        defer { PendingFutures.longWaitThreshold = threshold }
        PendingFutures.longWaitThreshold = .zero
        let lints = PendingFutures.snapshotDump.lints.filter {
            $0.kind == .longWait && $0.message.contains("Deferred<Int>") && $0.message.contains("PendingChainTests")
        }
        #expect(lints.contains { $0.message.hasPrefix("upon on .immediate, ") })
        #expect(PendingFutures.lintCount(.longWait) >= 1)
        writer.fill(with: 1)
    }

    @Test func theDumpPrintsEveryChainThenTheLints() {
        let dump = PendingDump(
            chains: [
                PendingChain(links: [
                    PendingLink(kind: .writer, name: "Deferred<Int>", label: "a", place: "A.swift:1", age: .seconds(3)),
                    PendingLink(kind: .stage, name: "map", age: .seconds(3)),
                    PendingLink(kind: .task, name: "task (priority medium)", age: .milliseconds(250)),
                ])
            ],
            lints: [PendingLint(kind: .longWait, message: "m")])
        #expect(
            dump.description == """
                Pending futures: 1 chain
                  Deferred<Int> "a" made at A.swift:1, 3.0 s ← map ← task (priority medium), 250 ms
                Lints: 1
                  longWait: m
                """)
    }
}

/// The dump's graph, without threads or nodes: which chains a snapshot makes.
@Suite struct PendingGraphTests {
    private typealias Node = PendingGraph<Int>.Node

    private func node(
        _ key: Int, pending: Bool = true, sources: [Int] = [], waiters: [String] = [], runs: Bool? = nil,
        gaveUp: PendingLint.Kind? = nil
    ) -> Node {
        Node(
            key: key, order: key, isPending: pending, workRuns: runs ?? pending,
            link: PendingLink(kind: sources.isEmpty ? .writer : .stage, name: "n\(key)", age: .zero),
            sources: sources,
            waiters: waiters.enumerated().map { (PendingLink(kind: .callback, name: $1, age: .zero), 100 + $0) },
            gaveUp: gaveUp.map { ($0, .seconds(1), "n\(key)") })
    }

    private func names(_ chains: [PendingChain]) -> [[String]] {
        chains.map { $0.links.map(\.name) }
    }

    @Test func aChainRunsFromTheHighestPendingNodeToEachWaiter() {
        let graph = PendingGraph([
            node(1, waiters: ["w1"]), node(2, sources: [1]), node(3, sources: [2], waiters: ["w3", "w3b"]),
        ])
        #expect(names(graph.chains()) == [["n1", "w1"], ["n1", "n2", "n3", "w3"], ["n1", "n2", "n3", "w3b"]])
    }

    @Test func aFilledNodeEndsNoChainAndStartsNone() {
        let graph = PendingGraph([node(1, pending: false), node(2, sources: [1]), node(3, sources: [2])])
        #expect(names(graph.chains()) == [["n2", "n3"]])
    }

    @Test func aJoinAppearsUnderEachOfItsPendingInputs() {
        let graph = PendingGraph([node(1), node(2), node(3, sources: [1, 2], waiters: ["w"])])
        #expect(names(graph.chains()) == [["n1", "n3", "w"], ["n2", "n3", "w"]])
        #expect(names(graph.chains(from: 2)) == [["n2", "n3", "w"]])
    }

    @Test func aCycleEndsTheChain() {
        let graph = PendingGraph([node(1), node(2, sources: [1, 3]), node(3, sources: [2])])
        #expect(names(graph.chains()) == [["n1", "n2", "n3"]])
    }

    @Test func aNodeThatGaveUpIsALintWhileWorkAboveItRuns() {
        let running = PendingGraph([
            node(1, pending: false, runs: true), node(2, pending: false, sources: [1], runs: false),
            node(3, pending: false, sources: [2], gaveUp: .limitPassedWhileWorkRuns),
        ])
        #expect(running.lints(longWait: nil).map(\.lint.kind) == [.limitPassedWhileWorkRuns])
        #expect(
            running.lints(longWait: nil).first?.lint.message
                == "n3 passed 1.0 s ago, and the work it limits still runs: n1, 0 ms")
        let done = PendingGraph([
            node(1, pending: false), node(2, pending: false, sources: [1], gaveUp: .sharedRunWithoutCallers),
        ])
        #expect(done.lints(longWait: nil).isEmpty)
    }
}

/// The registry's table of entries by address, against a dictionary.
@Suite struct AddressTableTests {
    private final class Box {
        let value: Int
        init(_ value: Int) { self.value = value }
    }

    @Test func randomInsertionsAndRemovalsMatchADictionary() {
        let table = AddressTable<Box>()
        var model: [UInt: Int] = [:]
        var generator = SystemRandomNumberGenerator()
        // Keys 16 bytes apart, as object addresses are, from a small range so that runs collide.
        for step in 0..<20_000 {
            let key = UInt.random(in: 1...600, using: &generator) << 4
            if Bool.random(using: &generator) {
                table[key] = Box(step)
                model[key] = step
            } else {
                #expect(table.removeValue(forKey: key)?.value == model.removeValue(forKey: key))
            }
            if step % 997 == 0 {
                #expect(table.count == model.count)
                for (key, value) in model {
                    #expect(table[key]?.value == value)
                }
                var seen = 0
                table.forEachEntry { key, box in
                    seen += 1
                    #expect(model[key] == box.value)
                }
                #expect(seen == model.count)
            }
        }
    }
}
