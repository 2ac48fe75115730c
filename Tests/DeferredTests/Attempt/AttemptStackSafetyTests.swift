import Deferred
import Dispatch
import TestSupport
import Testing

/// Guarantee 4 for attempts: a chain of attempts of any derived kind, as deep as the test size
/// says (20,000 quick, 1,000,000 at full size; see ``TestSize``; a recipe runs at the quick size,
/// see ``AttemptKind/deepChainSize``), on the immediate executor,
/// succeeds, fails, is cancelled from its tail, and is dropped unfinished, without overflowing
/// the stack of ``onDeepStack(_:size:_:)``.
@Suite(.skippedUnderThreadSanitizer) struct AttemptStackSafetyTests {
    static let depth = TestSize.current.depth

    /// A chain of `depth` stages of `kind` after a producer that counts its cancellations.
    struct Chain: ~Copyable, Sendable {
        let producer = DeferredAttempt<Int, TestError>()
        let stopped = Counter()
        let tail: Attempt<Int, TestError>

        init(_ kind: AttemptKind, queue: DispatchQueue) {
            producer.onCancel { [stopped] in stopped.increment() }
            var tail = producer.attempt
            for _ in 0..<kind.deepChainSize.depth {
                tail = kind.stage(after: tail, delayingOn: queue)
            }
            self.tail = tail
        }

        /// The tail's result, waiting for the delays of a `delay` chain.
        func result() -> Result<Int, TestError>? {
            tail.wait(until: .now() + 600)
        }
    }

    @Test(arguments: AttemptKind.allCases)
    func aDeepChainSucceeds(_ kind: AttemptKind) async {
        let queue = DispatchQueue(label: "delays")
        let result = await onDeepStack("attempt \(kind) chain, succeeded", size: kind.deepChainSize) {
            let chain = Chain(kind, queue: queue)
            chain.producer.succeed(with: 0)
            return chain.result()
        }
        #expect(result == kind.succeeded(depth: kind.deepChainSize.depth))
    }

    @Test(arguments: AttemptKind.allCases)
    func aDeepChainFails(_ kind: AttemptKind) async {
        let queue = DispatchQueue(label: "delays")
        let result = await onDeepStack("attempt \(kind) chain, failed", size: kind.deepChainSize) {
            let chain = Chain(kind, queue: queue)
            chain.producer.fail(with: .failed(0))
            return chain.result()
        }
        #expect(result == kind.failed(depth: kind.deepChainSize.depth))
    }

    @Test(arguments: AttemptKind.allCases)
    func cancellingTheTailOfADeepChainStopsTheProducer(_ kind: AttemptKind) async {
        let queue = DispatchQueue(label: "delays")
        let (tail, stopped, lateSuccess, producer) = await onDeepStack(
            "attempt \(kind) chain, cancelled", size: kind.deepChainSize
        ) {
            let chain = Chain(kind, queue: queue)
            chain.tail.cancel()
            // The producer learns it was cancelled; its late result is refused, and the
            // cancellation reaches every attempt of the chain.
            let lateSuccess = chain.producer.succeed(with: 0)
            return (chain.tail.peek(), chain.stopped.value, lateSuccess, chain.producer.peek())
        }
        #expect(tail == .failure(.cancelled))
        #expect(stopped == 1, "the producer's cancel handler ran once")
        #expect(!lateSuccess)
        #expect(producer == .failure(.cancelled))
    }

    @Test(arguments: AttemptKind.allCases)
    func droppingADeepUnfinishedChainReleasesIt(_ kind: AttemptKind) async {
        let live = LiveCount()
        let queue = DispatchQueue(label: "delays")
        let stopped = await onDeepStack("attempt \(kind) chain, dropped", size: kind.deepChainSize) {
            let chain = Chain(kind, queue: queue)
            let tracked = LifetimeTracked(live)
            chain.tail.upon(.immediate) { _ in _ = tracked }
            return chain.stopped.value
        }
        #expect(stopped == 0, "a handler needs the work, so nothing cancelled it")
        #expect(live.value == 0, "the handler at the end of the chain was released")
    }

    /// A failure type with no cancellation error of its own.
    struct Numbered: Error, Equatable {
        let code: Int
    }

    @Test func aDeepChainOfTranslatedPlainErrorsIsCancelledAndReleased() async {
        let translations = Counter()
        let (tail, stopped) = await onDeepStack("attempt mapError chain of plain errors, cancelled and dropped") {
            let producer = DeferredAttempt<Int, Numbered>(cancellationError: Numbered(code: 0))
            let stopped = Counter()
            producer.onCancel { stopped.increment() }
            var tail = producer.attempt
            for _ in 0..<Self.depth {
                tail = tail.mapError(upon: .immediate, cancellingWith: Numbered(code: -1)) { error in
                    translations.increment()
                    return Numbered(code: error.code + 1)
                }
            }
            tail.cancel()
            return (tail.peek(), stopped.value)
        }
        #expect(tail == .failure(Numbered(code: -1)), "the tail failed with the cancellation error it was given")
        #expect(translations.value == 0, "a cancellation is not a failure to translate")
        #expect(stopped == 1)
    }

    @Test func aDeepChainOfTranslatedPlainErrorsTranslatesAFailureOncePerStage() async {
        let translations = Counter()
        let tail = await onDeepStack("attempt mapError chain of plain errors, failed") {
            let producer = DeferredAttempt<Int, Numbered>(cancellationError: Numbered(code: 0))
            var tail = producer.attempt
            for _ in 0..<Self.depth {
                tail = tail.mapError(upon: .immediate, cancellingWith: Numbered(code: -1)) { error in
                    translations.increment()
                    return Numbered(code: error.code + 1)
                }
            }
            producer.fail(with: Numbered(code: 0))
            return tail.peek()
        }
        #expect(tail == .failure(Numbered(code: Self.depth)))
        #expect(translations.value == Self.depth, "once per stage, when the failure reached it")
    }

    /// A deep `map` chain with a handler on every stage, whose end alone is cancelled: every stage
    /// that a handler needs still runs, and only the end stops, without a recursion through the
    /// demand of the stages above it.
    @Test func aDeepChainWithAHandlerOnEveryStageStopsOnlyItsCancelledEnd() async {
        let depth = Self.depth
        let (runs, tail, late) = await onDeepStack("attempt map chain with a handler on every stage, end cancelled") {
            let root = DeferredAttempt<Int, TestError>()
            let runs = Counter()
            var stages = root.attempt
            for _ in 0..<depth {
                stages = stages.map(upon: .immediate) { value in
                    runs.increment()
                    return value + 1
                }
                stages.uponSuccess(.immediate) { _ in }
            }
            let end = stages.map(upon: .immediate) { $0 + 1 }
            end.cancel()
            root.succeed(with: 0)
            return (runs.value, stages.peek(), end.peek())
        }
        #expect(runs == depth, "every stage with a handler ran")
        #expect(tail == .success(depth))
        #expect(late == .failure(.cancelled))
    }
}
