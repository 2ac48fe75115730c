import Deferred
import Foundation
import Testing

/// Plain `async` code under a deadline: the caller gets the result in time, or the deadline
/// failure at the deadline, never later and never earlier, even from an operation that ignores
/// its cancellation; the operation reads the earliest deadline around it.
@Suite struct DeadlineRunTests {
    /// What an operation saw: its deadline, and whether its task was cancelled when it went on.
    final class Seen: Sendable {
        let deadline = Deferred<ContinuousClock.Instant?>()
        let cancelled = Deferred<Bool>()
    }

    @Test func anOperationThatFinishesInTimeReturnsItsValueAndReadsItsDeadline() async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        let seen = Seen()
        let value = try await Deadline.run(until: deadline) {
            seen.deadline.fill(with: Deadline.current)
            return 42
        }
        #expect(value == 42)
        #expect(seen.deadline.peek() == .some(deadline))
        #expect(Deadline.current == nil, "the deadline is the operation's, not the caller's")
        #expect(Deadline.remaining == nil)
    }

    @Test func anOperationThatIgnoresItsCancellationIsLeftRunningAtTheDeadline() async throws {
        let gate = Deferred<Void>()
        let seen = Seen()
        let deadline = Deferred<ContinuousClock.Instant>()
        await #expect(throws: DeadlineError.self) {
            // Set just before the call, so that it cannot pass before the call starts the
            // operation, which the rest of the test waits for.
            deadline.fill(with: .now + .milliseconds(50))
            return try await Deadline.run(until: deadline.peek()!) {
                await gate.value  // ignores cancellation
                seen.cancelled.fill(with: Task.isCancelled)
                return 1
            }
        }
        #expect(ContinuousClock.now >= deadline.peek()!, "returned before the deadline")
        #expect(!seen.cancelled.isFilled, "it returned while the operation still ran")
        gate.fill()
        #expect(await seen.cancelled.value, "the operation's task was cancelled at the deadline")
    }

    @Test func anOperationThatHonoursCancellationIsStoppedAtTheDeadline() async throws {
        let seen = Seen()
        let deadline = Deferred<ContinuousClock.Instant>()
        await #expect(throws: DeadlineError.self) {
            deadline.fill(with: .now + .milliseconds(50))  // just before the call, as above
            return try await Deadline.run(until: deadline.peek()!) {
                do {
                    try await Task.sleep(for: .seconds(60))
                } catch {
                    seen.cancelled.fill(with: error is CancellationError)
                    throw error
                }
            }
        }
        #expect(ContinuousClock.now >= deadline.peek()!)
        #expect(await seen.cancelled.value, "its sleep ended with CancellationError")
    }

    /// Operations that spin, checking their cancellation, on every thread of the task pool: the
    /// deadline still passes and cancels them, rather than waiting for a thread of that pool (on
    /// Linux it is Dispatch's) until they stop by themselves.
    @Test func operationsThatFillTheTaskPoolAreCancelledAtTheDeadline() async {
        let patience = Duration.seconds(5)
        let stoppedByCancellation = (0..<max(2, ProcessInfo.processInfo.activeProcessorCount)).map { _ in
            Deferred<Bool>()
        }
        let deadline = ContinuousClock.now + .milliseconds(200)
        await withTaskGroup(of: Void.self) { group in
            for stopped in stoppedByCancellation {
                group.addTask {
                    _ = try? await Deadline.run(until: deadline) {
                        let began = ContinuousClock.now
                        while !Task.isCancelled && ContinuousClock.now < began + patience {}
                        stopped.fill(with: Task.isCancelled)
                    }
                    // On a busy machine the deadline may pass before the call: then its operation
                    // never starts, and there is nothing to stop.
                    stopped.fill(with: true)
                }
            }
        }
        var stops: [Bool] = []
        for stopped in stoppedByCancellation {
            stops.append(await stopped.value)  // each spinner stops within its patience
        }
        // With the limit on a global queue, no spinner was cancelled: each spun its 5 s here.
        #expect(stops.allSatisfy { $0 }, "cancelled: \(stops)")
    }

    @Test func aDeadlineThatHasPassedFailsAtOnceWithoutStartingTheOperation() async {
        let started = Deferred<Void>()
        await #expect(throws: DeadlineError.self) {
            try await Deadline.run(until: .now - .milliseconds(1)) {
                started.fill()
            }
        }
        #expect(!started.isFilled)
    }

    @Test func theOperationsOwnErrorIsThrownAsItIs() async {
        struct Refused: Error, Equatable {}
        await #expect(throws: Refused()) {
            try await Deadline.run(until: .now + .seconds(60)) { () async throws -> Int in
                throw Refused()
            }
        }
    }

    /// Nested calls: the earliest deadline is the one the work reads and the one that fails it.
    /// (The deadlines that must not pass during a test are a minute away, and no expectation
    /// needs an operation to start before a short deadline passes: on a busy machine it may not.)
    @Test func underAnEarlierDeadlineALaterOneChangesNothing() async throws {
        let outer = ContinuousClock.now + .seconds(60)
        let read = try await Deadline.run(until: outer) {
            try await Deadline.run(until: outer + .seconds(60)) { Deadline.current }
        }
        #expect(read == outer)
        let passing = ContinuousClock.now + .milliseconds(40)
        await #expect(throws: DeadlineError.self) {
            try await Deadline.run(until: passing) {
                try await Deadline.run(until: passing + .seconds(60)) {
                    try await Task.sleep(for: .seconds(60))
                }
            }
        }
        #expect(ContinuousClock.now >= passing)
    }

    @Test func anInnerEarlierDeadlineAppliesInsideOnly() async throws {
        let outer = ContinuousClock.now + .seconds(120)
        let inner = ContinuousClock.now + .seconds(60)
        let (insideInner, afterInner, failedInner) = try await Deadline.run(until: outer) {
            let read = try await Deadline.run(until: inner) { Deadline.current }
            let result = await Result {
                try await Deadline.run(until: .now + .milliseconds(20)) {
                    try await Task.sleep(for: .seconds(60))
                }
            }
            return (read, Deadline.current, result)
        }
        #expect(insideInner == inner)
        #expect(afterInner == outer)
        #expect(throws: DeadlineError.self) { try failedInner.get() }
    }

    @Test func aCancelledCallerStopsWaitingAtOnceAndCancelsTheOperation() async throws {
        let gate = Deferred<Void>()
        let seen = Seen()
        let entered = Deferred<Void>()
        let caller = Task {
            try await Deadline.run(until: .now + .seconds(60)) {
                entered.fill()
                await gate.value  // ignores cancellation
                seen.cancelled.fill(with: Task.isCancelled)
            }
        }
        await entered.value
        caller.cancel()
        await #expect(throws: CancellationError.self) { try await caller.value }
        #expect(!seen.cancelled.isFilled, "it returned while the operation still ran")
        gate.fill()
        #expect(await seen.cancelled.value, "the operation's task was cancelled with its caller")
    }

    @Test func aTaskStartedInsideInheritsTheDeadline() async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        let inherited = try await Deadline.run(until: deadline) {
            await Task { Deadline.current }.value
        }
        #expect(inherited == deadline)
    }
}

extension Result where Failure == any Error {
    fileprivate init(catching body: () async throws -> Success) async {
        do {
            self = .success(try await body())
        } catch {
            self = .failure(error)
        }
    }
}
