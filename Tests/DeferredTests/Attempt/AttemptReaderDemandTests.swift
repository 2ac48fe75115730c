import Deferred
import Dispatch
import TestSupport
import Testing

/// Guarantee 8 for readers: a task awaiting `get()` is a consumer like a handler.
///
/// When the task is cancelled and nothing else needs the attempt, the attempt is cancelled and
/// the cancellation reaches the producer; while a handler or a derived stage still needs it, the
/// work goes on.
///
/// For every kind of derived attempt (``AttemptKind``), after a producer that counts how often it
/// was told to stop, with the readers of ``Readers``.
@Suite struct AttemptReaderDemandTests {
    /// Who reads the attempt under test.
    enum Readers: String, CaseIterable, CustomTestStringConvertible {
        case oneTask, twoTasks, aTaskAndAHandler, aTaskAndADerivedStage

        var testDescription: String { rawValue }

        /// How many tasks await `get()`.
        var tasks: Int { self == .twoTasks ? 2 : 1 }

        /// Whether something other than the tasks still needs the attempt once they are cancelled.
        var othersRemain: Bool { self == .aTaskAndAHandler || self == .aTaskAndADerivedStage }
    }

    @Test(arguments: AttemptKind.allCases, Readers.allCases)
    func cancellingEveryTaskAwaitingGetStopsTheWorkUnlessSomethingElseNeedsIt(
        _ kind: AttemptKind, _ readers: Readers
    ) async {
        let producer = DeferredAttempt<Int, TestError>()
        let stopped = Counter()
        producer.onCancel { stopped.increment() }
        let attempt = kind.stage(after: producer.attempt, delayingOn: DispatchQueue(label: "delays"))
        let handled = Deferred<Int>()
        var derived: Attempt<Int, TestError>?
        switch readers {
        case .aTaskAndAHandler: attempt.uponSuccess(.immediate) { handled.fill(with: $0) }
        case .aTaskAndADerivedStage: derived = attempt.map(upon: .immediate) { $0 }
        case .oneTask, .twoTasks: break
        }
        let tasks = (0..<readers.tasks).map { _ in
            Task { () async throws(TestError) -> Int in try await attempt.get() }
        }
        for task in tasks {
            task.cancel()
        }
        for task in tasks {
            #expect(await failure(of: task) == .cancelled, "get() throws the cancellation error at once")
        }

        if readers.othersRemain {
            #expect(stopped.value == 0, "the \(readers) still needs the work")
            #expect(attempt.isCancelled == false)
            #expect(producer.succeed(with: 0) == true)
            #expect(attempt.value(within: 10) == kind.succeeded(depth: 1))
            #expect(derived?.peek() ?? attempt.peek() == kind.succeeded(depth: 1))
            if readers == .aTaskAndAHandler {
                #expect(handled.value(within: 10) == kind.succeeded(depth: 1).successValue, "the handler got it")
            }
            return
        }
        #expect(stopped.value == 1, "the producer was told to stop, once")
        #expect(attempt.isCancelled == true)
        #expect(producer.succeed(with: 0) == false, "a stopped producer's late result is refused")
        withExtendedLifetime(derived) {}
    }
}

/// Guarantee 8 with readers waiting: `cancel()` on an attempt that tasks await stops what
/// nothing else needs before it returns, without waiting for those tasks to run again.
@Suite struct AttemptCancelWithReadersTests {
    @Test(arguments: AttemptKind.allCases, [1, 2])
    func cancellingAnAttemptThatTasksAwaitStopsTheProducerBeforeItReturns(_ kind: AttemptKind, _ readers: Int) async {
        let producer = DeferredAttempt<Int, TestError>()
        let stopped = Counter()
        producer.onCancel { stopped.increment() }
        let attempt = kind.stage(after: producer.attempt, delayingOn: DispatchQueue(label: "delays"))
        let tasks = (0..<readers).map { _ in
            Task { () async throws(TestError) -> Int in try await attempt.get() }
        }
        // Lets the tasks start waiting; if one has not yet, it finds the attempt cancelled.
        try? await Task.sleep(for: .milliseconds(20))
        attempt.cancel()
        #expect(stopped.value == 1, "the producer was told to stop by the time cancel() returned")
        #expect(producer.succeed(with: 0) == false, "its late result is refused")
        for task in tasks {
            #expect(await failure(of: task) == .cancelled)
        }
        #expect(stopped.value == 1, "once")
    }
}
