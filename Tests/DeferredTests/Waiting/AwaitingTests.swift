import Deferred
import Dispatch
import Foundation
import TestSupport
import Testing

@Suite struct AwaitingTests {
    @Test func awaitingAFilledFutureReturnsAtOnce() async {
        #expect(await Future(filledWith: 3).value == 3)
        #expect(await Deferred(filledWith: "x").value == "x")
        #expect(await Future(filledWith: 3).lazy.map { $0 + 1 }.value == 4)
    }

    @Test func awaitingSuspendsUntilAnotherThreadFills() async {
        let deferred = Deferred<Int>()
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.01) { deferred.fill(with: 9) }
        #expect(await deferred.value == 9)
    }

    @Test func anyKindOfFutureCanBeAwaited() async {
        let base = Deferred<Int>()
        let custom = CountingFuture(base: base)
        let ignored = base.ignored()
        DispatchQueue.global().async { base.fill(with: 2) }
        #expect(await custom.value == 2)
        #expect(await Future(custom).value == 2)
        await ignored.value
    }

    @Test func manyTasksAwaitingOneFutureAllGetTheValue() async {
        let deferred = Deferred<Int>()
        await withTaskGroup(of: Int.self) { group in
            for _ in 0..<1_000 {
                group.addTask { await deferred.value }
            }
            DispatchQueue.global().async { deferred.fill(with: 7) }
            var count = 0
            for await value in group {
                #expect(value == 7)
                count += 1
            }
            #expect(count == 1_000)
        }
    }

    @Test func getReturnsTheValue() async throws {
        let deferred = Deferred<Int>()
        DispatchQueue.global().async { deferred.fill(with: 4) }
        #expect(try await deferred.get() == 4)
        #expect(try await Future(filledWith: 5).get() == 5)
        #expect(try await CountingFuture(base: deferred).get() == 4)
    }

    @Test func getThrowsCancellationErrorWhenTheTaskIsCancelled() async throws {
        let deferred = Deferred<Int>()
        let task = Task { try await deferred.get() }
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(deferred.fill(with: 1) == true, "cancelling a reader does not touch the future")
        #expect(try await deferred.get() == 1)
    }

    @Test func getOfAnAlreadyCancelledTaskThrowsAtOnceUnlessTheValueIsThere() async {
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            let filled = try await Future(filledWith: 1).get()
            _ = try await Future<Int>.never.get()
            return filled
        }
        await #expect(throws: CancellationError.self) { try await task.value }
    }

    @Test func getOnTheNeverFutureEndsOnlyByCancellation() async {
        let task = Task { try await Future<Int>.never.get() }
        try? await Task.sleep(for: .milliseconds(10))
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
    }

    @Test func getOfACustomFutureIsCancellableToo() async {
        let base = Deferred<Int>()
        let task = Task { try await CountingFuture(base: base).get() }
        try? await Task.sleep(for: .milliseconds(10))
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        base.fill(with: 1)
    }

    #if EXIT_TESTS  // a test in a child process; see testSwiftSettings in Package.swift
        @Test(.timeLimit(.minutes(2)), .enabled(if: residentMemory() != nil))
        func cancelledWaitersLeaveMemoryFlat() async {
            // Measured in a child process of its own, so that no other test's memory counts. (Tasks
            // waiting in large batches make resident memory swing by megabytes on their own; the
            // registry's size after batches is checked exactly in RepresentationTests.)
            let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
                let deferred = Deferred<[UInt8]>()
                await cancelWaiters(on: deferred, count: 5_000, together: 1)  // warm the caches up
                let before = residentMemory() ?? 0
                await cancelWaiters(on: deferred, count: 100_000, together: 1)
                let growth = (residentMemory() ?? 0) - before
                // Kept, each cancelled waiter would cost about 100 bytes: 10 MB for 100,000.
                print("growth: \(growth)")
                endExitTest(passed: true)
            }
            let report = String(decoding: result?.standardOutputContent ?? [], as: UTF8.self)
            let growth = measuredFigure("growth", in: report)
            progress("100,000 cancelled waiters on one unfilled future: resident memory grew by \(growth ?? -1) bytes")
            #expect(growth.map { $0 < 3_000_000 } == true, "grew by \(growth ?? -1) bytes; the limit is 3 MB")
        }
    #endif
}

/// Starts `count` tasks awaiting `deferred`, `together` at a time, and cancels them.
private func cancelWaiters(on deferred: Deferred<[UInt8]>, count: Int, together: Int) async {
    for _ in 0..<count / together {
        let tasks = (0..<together).map { _ in Task { try await deferred.get() } }
        if together > 1 {
            try? await Task.sleep(for: .milliseconds(20))  // let them suspend in get()
        }
        for task in tasks {
            task.cancel()
        }
        for task in tasks {
            _ = await task.result
        }
    }
}

@Suite struct AsyncFutureTests {
    @Test func aFutureFromAsyncWorkIsFilledWithItsResult() async {
        let future = Future {
            try? await Task.sleep(for: .milliseconds(5))
            return 11
        }
        #expect(await future.value == 11)
    }

    @Test func theTaskHasThePriorityAskedFor() async {
        let priority = Future(priority: .background) { await currentPriority() }
        #expect(await priority.value <= .utility)
    }

    @Test func theWorkRunsWithoutAnyoneAwaiting() async {
        let started = Deferred<Void>()
        _ = Future { await started.fillFromTask() }
        await started.value
    }
}

@Suite struct FillOrderTests {
    @Test func valuesArriveInTheOrderTheFuturesAreFilled() async {
        let parts = (0..<5).map { _ in Deferred<Int>() }
        let stream = parts.valuesInFillOrder()
        for index in [3, 1, 4, 0, 2] {
            parts[index].fill(with: index)
        }
        var seen: [Int] = []
        for await value in stream {
            seen.append(value)
        }
        #expect(seen == [3, 1, 4, 0, 2])
    }

    @Test func valuesFilledWhileIteratingArriveToo() async {
        let parts = (0..<3).map { _ in Deferred<String>() }
        parts[1].fill(with: "b")
        var iterator = parts.valuesInFillOrder().makeAsyncIterator()
        #expect(await iterator.next() == "b")
        DispatchQueue.global().async { parts[2].fill(with: "c") }
        #expect(await iterator.next() == "c")
        parts[0].fill(with: "a")
        #expect(await iterator.next() == "a")
        #expect(await iterator.next() == nil)
    }

    @Test func noFuturesMeansAnEmptySequence() async {
        var count = 0
        for await _ in [Future<Int>]().valuesInFillOrder() {
            count += 1
        }
        #expect(count == 0)
    }

    @Test func cancellingTheIteratingTaskEndsTheSequence() async {
        let never = [Future<Int>.never]
        let task = Task {
            var count = 0
            for await _ in never.valuesInFillOrder() {
                count += 1
            }
            return count
        }
        try? await Task.sleep(for: .milliseconds(10))
        task.cancel()
        #expect(await task.value == 0)
    }
}

@Suite struct MainActorExecutorTests {
    @MainActor final class Screen {
        var title = ""
    }

    @Test @MainActor func handlersOnTheMainActorMayTouchMainActorState() async {
        let screen = Screen()
        let deferred = Deferred<String>()
        let shown = Deferred<Void>()
        deferred.uponMainActor { title in
            screen.title = title  // main-actor isolated: compiles without `await`
            shown.fill()
        }
        DispatchQueue.global().async { deferred.fill(with: "Hello") }
        await shown.value
        #expect(screen.title == "Hello")
    }

    @Test func mapOnTheMainActorRunsTheTransformThere() async {
        let mapped = Future(filledWith: 2).map(upon: .mainActor) { value in
            MainActor.assumeIsolated { value * 10 }
        }
        #expect(await mapped.value == 20)
    }

    @Test func theMainActorExecutorRunsBodiesInOrderOnTheMainActor() async {
        let recorder = OrderRecorder(count: 50)
        let done = Deferred<Void>()
        for index in 0..<50 {
            MainActorExecutor.shared.submit {
                MainActor.assumeIsolated { recorder.record(index) }
                if index == 49 {
                    done.fill()
                }
            }
        }
        await done.value
        #expect(recorder.order == Array(0..<50))
    }
}

private func currentPriority() async -> TaskPriority {
    Task.currentPriority
}

extension Deferred where Value == Void {
    fileprivate func fillFromTask() async {
        fill()
    }
}
