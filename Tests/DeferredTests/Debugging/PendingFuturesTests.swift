import Deferred
import DeferredTesting
import TestSupport
import Testing

/// "Why hasn't this filled?": the writers a piece of code leaves unfilled, with where they were
/// made, and a pending future's description.
@Suite struct PendingFuturesTests {
    @Test func aScopeReportsTheWritersItLeftUnfilledWithTheirPlace() {
        let kept = Deferred<Int>()
        var line: UInt = 0
        let (waiting, pending) = PendingFutures.madeDuring {
            let filled = Deferred<Int>()
            filled.fill(with: 1)
            line = #line + 1
            let forgotten = Deferred<String>()
            forgotten.upon(.immediate) { _ in }
            _ = Deferred<Int>()  // dropped unfilled, with nobody waiting: still reported
            kept.fill(with: 2)
            return forgotten
        }
        #expect(
            pending == [
                PendingFuture(
                    typeName: "Deferred<String>", file: "DeferredTests/PendingFuturesTests.swift", line: line,
                    isWaitedFor: true),
                PendingFuture(
                    typeName: "Deferred<Int>", file: "DeferredTests/PendingFuturesTests.swift", line: line + 2,
                    isWaitedFor: false),
            ])
        #expect(
            pending.first?.description
                == "Deferred<String> made at DeferredTests/PendingFuturesTests.swift:\(line), waited for")
        waiting.fill(with: "late")
    }

    @Test func attemptsAreReportedUnlessTheyFinished() {
        let (kept, pending) = PendingFutures.madeDuring {
            let typed = HeldWriter<Int, TestError>()  // kept past the scope: still pending
            _ = typed.attempt.map(upon: .immediate) { $0 + 1 }
            let lost = DeferredAttempt<Int, any Error>()  // abandoned at the end of the scope
            _ = lost.attempt
            let orphaned = DeferredAttempt<Int, TestError>()  // orphaned at the end of the scope
            _ = orphaned.attempt.map(upon: .immediate) { $0 + 1 }
            _ = Attempt<Int, TestError> { writer in writer.succeed(with: 1) }
            return typed
        }
        #expect(pending.map(\.typeName) == ["DeferredAttempt<Int, TestError>"])
        #expect(pending.first?.isWaitedFor == true, "the map waits for it")
        #expect(kept.peek() == nil)
    }

    @Test func aScopeWatchesItsTaskOnly() async {
        let outside = Deferred<Int>()
        let line: UInt = #line + 2
        let (_, pending) = await PendingFutures.madeDuring {
            let inside = Future<Int> { _ in }
            try? await Task.sleep(for: .milliseconds(1))
            return inside
        }
        #expect(pending.map(\.typeName) == ["Deferred<Int>"])
        #expect(pending.first?.line == line, "a producer's place is where the Future is made")
        outside.fill(with: 0)
    }

    @Test func anOuterScopeSeesWhatAnInnerOneRecorded() {
        let (inner, outer) = PendingFutures.madeDuring {
            PendingFutures.madeDuring { _ = Deferred<Int>() }.pending
        }
        #expect(inner.count == 1)
        #expect(outer == inner)
    }

    @Test func aTaskStartedInAScopeRecordsNothingIntoItOnceItReturned() async {
        let live = LiveCount()
        let start = Deferred<Void>()
        let made = Deferred<Void>()
        let (task, pending) = PendingFutures.madeDuring {
            Task {
                await start.value
                for _ in 0..<100 {
                    let deferred = Deferred<Int>()
                    let tracked = LifetimeTracked(live)
                    deferred.upon(.immediate) { _ in _ = tracked }
                }
                made.fill()
            }
        }
        #expect(pending.isEmpty)
        // Another scope keeps recording switched on while the task makes its writers.
        _ = await PendingFutures.madeDuring {
            start.fill()
            await made.value
        }
        #expect(live.value == 0, "the closed scope kept the task's writers")
        await task.value
    }

    @Test func aPendingFutureSaysWhetherAnythingWaitsAndWhereItWasMade() {
        let plain = Deferred<Int>()
        #expect(plain.debugDescription == "Deferred(unfilled)")
        Future(plain).upon(.immediate) { _ in }
        #expect(Future(plain).debugDescription == "Future(unfilled, waited for)")
        let (description, _) = PendingFutures.madeDuring {
            let writer = DeferredAttempt<Int, TestError>()
            defer { writer.succeed(with: 0) }
            return "\(String(reflecting: writer.attempt)) #\(#line - 2)"
        }
        let line = description.split(separator: "#").last.map(String.init) ?? ""
        #expect(
            description
                == "Attempt(unfilled, made at DeferredTests/PendingFuturesTests.swift:\(line)) #\(line)")
        plain.fill(with: 0)
    }

    @Test(.leavesNoPendingFutures) func aTestThatFillsWhatItMakesPassesTheTrait() async {
        let deferred = Deferred<Int>()
        let writer = DeferredAttempt<Int, TestError>()
        Task { deferred.fill(with: 1) }
        writer.succeed(with: 2)
        #expect(await deferred.value == 1)
    }

    @Test func theTraitFailsATestThatLeavesAFuturePending() async throws {
        let test = try #require(Test.current)
        let line: UInt = #line + 5
        try await withKnownIssue {
            try await LeavesNoPendingFutures().provideScope(
                for: test, testCase: Test.Case.current,
                performing: {
                    _ = Deferred<Int>()
                })
        } matching: { issue in
            // Reported at the test's own line, not inside the library.
            issue.sourceLocation == test.sourceLocation
                && issue.comments.contains {
                    $0.rawValue.hasPrefix(
                        "the test left a future pending: Deferred<Int> made at "
                            + "DeferredTests/PendingFuturesTests.swift:\(line), with no reader\n  Deferred<Int> made at "
                    )
                }
        }
    }

    @Test func theTimeLimitTraitReportsWhatAStuckTestWaitsOnAndCancelsIt() async throws {
        let test = try #require(Test.current)
        let line: UInt = #line + 6
        let ended = Deferred<Bool>()
        try await withKnownIssue {
            try await ReportsStuckFutures(after: .milliseconds(20)).provideScope(
                for: test, testCase: Test.Case.current,
                performing: {
                    let never = Deferred<Int>(named: "never filled")
                    do {
                        _ = try await never.map(upon: .immediate) { $0 }.get()
                    } catch {
                        ended.fill(with: true)  // The trait cancelled the test's task.
                        throw error
                    }
                })
        } matching: { issue in
            issue.sourceLocation == test.sourceLocation
                && issue.comments.contains {
                    $0.rawValue.hasPrefix("the test ran longer than 0.02 seconds; it left 1 future(s) pending")
                        && $0.rawValue.contains(
                            "Deferred<Int> \"never filled\" made at DeferredTests/PendingFuturesTests.swift:\(line)")
                        && $0.rawValue.contains(" ← map ← task ")
                }
        }
        #expect(ended.peek() == true)
    }

    @Test func theTimeLimitTraitLetsATestThatEndsInTimePass() async throws {
        let test = try #require(Test.current)
        try await ReportsStuckFutures(after: .seconds(3600)).provideScope(
            for: test, testCase: Test.Case.current,
            performing: {
                let filled = Deferred<Int>()
                Task { filled.fill(with: 1) }
                #expect(await filled.value == 1)
            })
    }
}
