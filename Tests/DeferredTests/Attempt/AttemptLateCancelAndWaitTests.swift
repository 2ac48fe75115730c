import Deferred
import Dispatch
import TestSupport
import Testing

/// What reads and late cancellations do to the work: a blocking wait that times out does not
/// cancel it, and a `cancel()` after the attempt finished never runs the producer's cancel
/// handlers.
@Suite struct AttemptLateCancelAndWaitTests {
    /// The attempts a reader may wait on, each over a producer that counts its cancellations.
    enum Reader: String, CaseIterable, CustomTestStringConvertible {
        case root, map, andThen, allSucceeded

        var testDescription: String { rawValue }

        func attempt(over producer: borrowing DeferredAttempt<Int, TestError>) -> Attempt<Int, TestError> {
            switch self {
            case .root: producer.attempt
            case .map: producer.attempt.map(upon: .immediate) { $0 }
            case .andThen: producer.attempt.andThen(upon: .immediate) { Attempt(succeededWith: $0) }
            case .allSucceeded: [producer.attempt].allSucceeded().map(upon: .immediate) { $0[0] }
            }
        }
    }

    @Test(arguments: Reader.allCases)
    func aWaitThatTimesOutLeavesTheWorkRunning(_ reader: Reader) {
        let producer = DeferredAttempt<Int, TestError>()
        let stopped = Counter()
        producer.onCancel { stopped.increment() }
        let attempt = reader.attempt(over: producer)
        #expect(attempt.wait(until: .now() + .milliseconds(5)) == nil)
        #expect(stopped.value == 0, "a read that gave up stopped the producer")
        #expect(attempt.isCancelled == false)
        #expect(producer.succeed(with: 7) == true, "the producer's result was refused")
        #expect(attempt.peek() == .success(7))
    }

    @Test func aWaitOnABridgedFutureThatTimesOutKeepsItsValue() {
        let source = Deferred<Int>()
        let bridged = Attempt<Int, TestError>(source)
        #expect(bridged.wait(until: .now() + .milliseconds(5)) == nil)
        source.fill(with: 3)
        #expect(bridged.peek() == .success(3))
    }

    @Test func aWaitThatOutlivesTheLastDependentCancelsWhenItGivesUp() async {
        let producer = DeferredAttempt<Int, TestError>()
        let stopped = Counter()
        producer.onCancel { stopped.increment() }
        let derived = producer.attempt.map(upon: .immediate) { $0 }
        let waiting = Deferred<Void>()
        let waited = Deferred<Result<Int, TestError>?>()
        DispatchQueue.global().async {
            waiting.fill(with: ())
            waited.fill(with: producer.attempt.wait(until: .now() + .milliseconds(200)))
        }
        await waiting.value
        // The dependent gives up while the reader holds the work (or just before it took it).
        derived.cancel()
        _ = await waited.value
        #expect(stopped.value == 1, "nothing needs the work once the reader gave up too")
        #expect(producer.peek() == .failure(.cancelled))
    }

    @Test func cancellingAfterASuccessNeverRunsCancelHandlers() {
        let producer = DeferredAttempt<Int, TestError>()
        #expect(producer.succeed(with: 1) == true)
        producer.attempt.cancel()
        let ran = Counter()
        producer.onCancel { ran.increment() }
        #expect(producer.peek() == .success(1))
        #expect(ran.value == 0)
    }

    @Test func aCancelHandlerAddedAfterACancellationRunsAtOnce() {
        let producer = DeferredAttempt<Int, TestError>()
        producer.attempt.cancel()
        let ran = Counter()
        producer.onCancel { ran.increment() }
        #expect(ran.value == 1)
    }

    /// How a source finished before it was cancelled.
    enum Decided: String, CaseIterable, CustomTestStringConvertible {
        case succeeded, failed

        var testDescription: String { rawValue }
    }

    /// Guarantee 14, one late-cancel rule: an attempt derived from a cancelled attempt fails with
    /// the cancellation error, whatever the source had decided, and says so through
    /// `isCancelled`, `peek()` and its callbacks alike.
    @Test(arguments: AttemptKind.allCases, Decided.allCases)
    func everyAttemptDerivedFromALateCancelledAttemptFailsWithTheCancellationError(
        _ kind: AttemptKind, _ decided: Decided
    ) {
        let producer = DeferredAttempt<Int, TestError>()
        switch decided {
        case .succeeded: producer.succeed(with: 0)
        case .failed: producer.fail(with: .failed(0))
        }
        producer.attempt.cancel()
        #expect(producer.peek() == (decided == .succeeded ? .success(0) : .failure(.failed(0))), "the result stays")
        let reported = Counter()
        let derived = kind.stage(after: producer.attempt, delayingOn: DispatchQueue(label: "delays"))
            .uponSuccess(.immediate) { _ in reported.increment() }
            .uponFailure(.immediate) { _ in reported.increment() }
        #expect(derived.value(within: 10) == .failure(.cancelled))
        #expect(derived.isCancelled == true)
        let handled = Deferred<Result<Int, TestError>>()
        derived.upon(.immediate) { handled.fill(with: $0) }
        #expect(handled.peek() == .failure(.cancelled), "handlers see what peek() sees")
        #expect(reported.value == 0, "a cancellation reaches no success or failure callback")
    }

    /// A failure type with no cancellation error: `cancel()` tells the producer to stop, and
    /// the producer's own result still decides the attempt.
    @Test func aPlainErrorAttemptIsDecidedByItsProducerAfterCancel() {
        struct PlainError: Error, Equatable {}
        let producer = DeferredAttempt<Int, PlainError>()
        let stopped = Counter()
        producer.onCancel { stopped.increment() }
        producer.attempt.cancel()
        #expect(stopped.value == 1)
        #expect(producer.attempt.isCancelled == true)
        #expect(producer.peek() == nil)
        #expect(producer.fail(with: PlainError()) == true)
        #expect(producer.peek() == .failure(PlainError()))
    }
}
