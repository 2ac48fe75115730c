import Deferred
import Dispatch
import Foundation
import TestSupport
import Testing

/// A writer cannot be lost silently: when the `DeferredAttempt` of a pending attempt goes away,
/// however it goes, every kind of reader waiting for the attempt is answered at once, with an
/// error that is neither a cancellation nor the work's own.
@Suite struct AbandonedAttemptTests {
    enum Abandonable: CancellableError, AbandonableError, Equatable {
        case failed, cancelled, abandoned
    }

    /// How the last owner of a writer lets it go.
    enum Loss: String, CaseIterable, CustomTestStringConvertible {
        /// The scope that made it ends.
        case scope
        /// The escaping closure that captured it is released without running.
        case closure
        /// The object that kept it is released.
        case object
        /// The body of `Attempt { writer in … }` returns without finishing or keeping it.
        case producerBody

        var testDescription: String { rawValue }

        /// Makes a pending attempt, lets `read` start waiting for it, then loses the writer.
        ///
        /// Returns the line where the writer was made.
        func lose<Failure: Error>(_: Failure.Type, read: (Attempt<Int, Failure>) async -> Void) async -> UInt {
            switch self {
            case .scope:
                let line: UInt = #line + 1
                let writer = DeferredAttempt<Int, Failure>()
                await read(writer.attempt)
                return line
            case .closure:
                let line: UInt = #line + 1
                let writer = DeferredAttempt<Int, Failure>()
                let attempt = writer.attempt
                var pending: (@Sendable () -> Void)? = { writer.succeed(with: 1) }
                await read(attempt)
                #expect(pending != nil)
                pending = nil
                return line
            case .object:
                let line: UInt = #line + 1
                var held: HeldWriter<Int, Failure>? = HeldWriter()
                await read(held!.attempt)
                held = nil
                return line
            case .producerBody:
                // The body runs before the attempt exists for anyone else: the reader comes
                // after the loss and must be answered at once too.
                let line: UInt = #line + 1
                let attempt = Attempt<Int, Failure> { _ in }
                await read(attempt)
                return line
            }
        }
    }

    /// Every kind of reader: a handler, a blocked thread, an awaiting task, a derived stage.
    enum Reader: String, CaseIterable, CustomTestStringConvertible {
        case handler, blockingWait, awaitingTask, derivedStage

        var testDescription: String { rawValue }

        /// Starts waiting for `attempt`; what it gets is filled into `got`.
        func start<Failure: Error>(_ attempt: Attempt<Int, Failure>, into got: Deferred<Result<Int, Failure>?>) async {
            switch self {
            case .handler:
                attempt.upon(.immediate) { got.fill(with: $0) }
            case .blockingWait:
                let waiting = Deferred<Void>()
                Thread.detachNewThread {
                    waiting.fill()
                    // Longer than `answer()` polls: under a sanitizer on a busy machine, the
                    // test's task may wait a minute for a thread of the cooperative pool before
                    // it loses the writer.
                    got.fill(with: attempt.wait(for: .seconds(600)))
                }
                await waiting.value
                try? await Task.sleep(for: .milliseconds(10))  // Let the thread start waiting.
            case .awaitingTask:
                let started = Deferred<Void>()
                Task {
                    started.fill()
                    got.fill(with: await attempt.value)
                }
                await started.value
                try? await Task.sleep(for: .milliseconds(10))  // Let the task start waiting.
            case .derivedStage:
                attempt.map(upon: .immediate) { $0 + 1 }.upon(.immediate) { got.fill(with: $0) }
            }
        }
    }

    @Test(arguments: Loss.allCases, Reader.allCases)
    func anAttemptOfAnyErrorFailsWithAnAbandonedErrorNamingTheWriter(_ loss: Loss, _ reader: Reader) async throws {
        let got = Deferred<Result<Int, any Error>?>()
        let line = await loss.lose((any Error).self) { await reader.start($0, into: got) }
        let result = try #require(await got.answer(), "the reader was not answered")
        let error = try #require(result?.failureValue as? AbandonedError)
        #expect(error.file == "DeferredTests/AbandonedAttemptTests.swift")
        #expect(error.line == line)
        #expect(error.writerType == "DeferredAttempt<Int, any Error>")
        #expect(
            error.description
                == "DeferredAttempt<Int, any Error> made at DeferredTests/AbandonedAttemptTests.swift:\(line) "
                + "was released before it finished")
    }

    @Test(arguments: Loss.allCases, Reader.allCases)
    func anAttemptOfAnAbandonableErrorFailsWithAbandoned(_ loss: Loss, _ reader: Reader) async {
        let got = Deferred<Result<Int, Abandonable>?>()
        _ = await loss.lose(Abandonable.self) { await reader.start($0, into: got) }
        #expect(await got.answer() == .some(.failure(.abandoned)))
    }

    @Test func aTaskAwaitingGetThrowsTheAbandonedError() async {
        let attempt: Attempt<Int, any Error>
        do {
            let writer = DeferredAttempt<Int, any Error>()
            attempt = writer.attempt
        }
        await #expect(throws: AbandonedError.self) { try await attempt.get() }
        #expect(attempt.isCancelled == false, "abandoned is not cancelled")
    }

    @Test func onlyTheLastOwnerOfTheWriterAbandonsIt() {
        let writer = DeferredAttempt<Int, Abandonable>()
        let attempt = writer.attempt
        var first: (@Sendable () -> Void)? = { writer.succeed(with: 1) }
        var second: (@Sendable () -> Void)? = { writer.succeed(with: 2) }
        first = nil
        #expect(attempt.peek() == nil, "the second closure still holds the writer")
        second?()
        second = nil
        #expect(first == nil)
        #expect(attempt.peek() == .success(2))
    }

    @Test func aFinishedOrCancelledAttemptKeepsItsResultWhenItsWriterGoes() {
        var succeeded: HeldWriter<Int, Abandonable>? = HeldWriter()
        let success = succeeded!.attempt
        succeeded!.succeed(with: 1)
        succeeded = nil
        #expect(success.peek() == .success(1))

        let stopped = Counter()
        var cancelled: HeldWriter<Int, Abandonable>? = HeldWriter()
        cancelled!.onCancel { stopped.increment() }
        let cancellation = cancelled!.attempt
        cancellation.cancel()
        cancelled = nil
        #expect(cancellation.peek() == .failure(.cancelled))
        #expect(stopped.value == 1)
    }

    @Test func abandonmentRunsNoCancelHandlerAndKeepsNothing() {
        let stopped = Counter()
        let live = LiveCount()
        var held: HeldWriter<Int, Abandonable>? = HeldWriter()
        do {
            let tracked = LifetimeTracked(live)
            held!.onCancel {
                _ = tracked
                stopped.increment()
            }
        }
        let attempt = held!.attempt
        let stage = attempt.map(upon: .immediate) { $0 + 1 }
        held = nil
        #expect(stage.peek() == .failure(.abandoned))
        #expect(stopped.value == 0, "nobody cancelled: the writer was lost")
        #expect(live.value == 0, "the cancel handlers are released with the decision")
        attempt.cancel()
        #expect(stopped.value == 0, "a cancel after the loss changes nothing")
        #expect(attempt.peek() == .failure(.abandoned))
    }

    @Test func aWriterMadeWithACancellationErrorIsAbandonedToo() {
        let attempt: Attempt<Int, Abandonable>
        do {
            let writer = DeferredAttempt<Int, Abandonable>(cancellationError: .failed)
            attempt = writer.attempt
        }
        #expect(attempt.peek() == .failure(.abandoned))
    }

    @Test func aFailureTypeThatCannotSayAbandonedIsOrphaned() {
        let attempt: Attempt<Int, TestError>
        do {
            let writer = DeferredAttempt<Int, TestError>()
            attempt = writer.attempt
        }
        #expect(attempt.peek() == nil, "TestError has no abandoned case: the attempt is orphaned")
        attempt.cancel()
        #expect(attempt.isCancelled)
        #expect(attempt.peek() == nil, "an orphaned attempt never gets a result")
    }

    @Test func aProducerThatFinishesOrKeepsItsWriterIsNotAbandoned() throws {
        let answered = Attempt<Int, any Error> { $0.succeed(with: 1) }
        #expect(try answered.peek()?.get() == 1)
        let kept = Deferred<HeldWriter<Int, any Error>>()
        let later = Attempt<Int, any Error> { kept.fill(with: HeldWriter($0)) }
        #expect(later.peek() == nil)
        kept.peek()?.succeed(with: 2)
        #expect(try later.peek()?.get() == 2)
    }

    @Test func aDeepChainBelowAnAbandonedWriterFailsWithoutOverflowingTheStack() async {
        let depth = TestSize.current.depth
        let result = await onDeepStack("attempt map chain, abandoned") {
            var held: HeldWriter<Int, Abandonable>? = HeldWriter()
            var tail = held!.attempt
            for _ in 0..<depth {
                tail = tail.map(upon: .immediate) { $0 + 1 }
            }
            held = nil
            return tail.peek()
        }
        #expect(result == .failure(.abandoned))
    }
}

extension Deferred {
    /// The value once it is there, or `nil` after a minute: a broken test fails instead of
    /// hanging, without blocking a thread of the cooperative pool.
    fileprivate func answer() async -> Value? {
        for _ in 0..<6_000 {
            if let value = peek() {
                return value
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }
}
