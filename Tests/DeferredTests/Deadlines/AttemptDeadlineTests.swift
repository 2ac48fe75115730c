import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import TestSupport
import Testing

/// Deadlines that travel with demand: a producer reads until when its consumers will wait, and
/// its work is cancelled once, at that instant, with the reason, if nothing else needs it.
@Suite struct AttemptDeadlineTests {
    /// A producer whose cancel handler records why it stopped, and how often it ran.
    final class Producer: Sendable {
        static let reasons: [CancellationReason] = [.cancelled, .deadlinePassed, .unneeded]

        let writer = DeferredAttempt<Int, TestError>()
        let stops = Sighting()

        init() {
            writer.onCancel { [stops] reason in stops.record(Self.reasons.firstIndex(of: reason)!) }
        }

        /// Why it stopped, if it did.
        var reason: CancellationReason? {
            stops.count == 0 ? nil : Self.reasons[stops.value]
        }
    }

    @Test(arguments: AttemptKind.allCases)
    func aDeadlineBelowAnyStageReachesTheProducerAndStopsItOnceWhenItPasses(_ kind: AttemptKind) {
        let clock = VirtualTimeExecutor()
        let queue = DispatchQueue(label: "delays")
        let producer = Producer()
        let stage = kind.stage(after: producer.writer.attempt, delayingOn: queue)
        let limited = stage.deadline(at: clock.now + .seconds(5), on: clock)
        #expect(producer.writer.deadline(on: clock) == clock.now + .seconds(5))
        clock.advance(by: .seconds(4))
        #expect(producer.stops.count == 0)
        #expect(producer.writer.deadline(on: clock) == clock.now + .seconds(1))
        clock.advance(by: .seconds(1))
        #expect(producer.stops.count == 1 && producer.reason == .deadlinePassed)
        #expect(limited.peek().map { "\($0)" } == "\(Result<Int, TestError>.failure(.cancelled))")
        #expect(producer.writer.attempt.isCancelled)
    }

    @Test func aProducerSeesTheLatestDeadlineOfItsConsumersUntilTheLastPasses() {
        let clock = VirtualTimeExecutor()
        let producer = Producer()
        #expect(producer.writer.deadline(on: clock) == nil, "no consumer yet: none")
        let early = producer.writer.attempt.deadline(at: clock.now + .seconds(5), on: clock)
        let late = producer.writer.attempt.map(upon: .immediate) { $0 * 2 }.deadline(
            at: clock.now + .seconds(9), on: clock)
        #expect(producer.writer.deadline(on: clock) == clock.now + .seconds(9))
        clock.advance(by: .seconds(5))
        #expect(early.peek() == .failure(.cancelled) && late.peek() == nil)
        #expect(producer.stops.count == 0, "a consumer still needs it")
        #expect(producer.writer.deadline(on: clock) == clock.now + .seconds(4))
        clock.advance(by: .seconds(4))
        #expect(late.peek() == .failure(.cancelled))
        #expect(producer.stops.count == 1 && producer.reason == .deadlinePassed)
    }

    /// The consumers that need an attempt for as long as it takes.
    enum Unbounded: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case handler, stageWithoutConsumers, successCallback, futureView
        var testDescription: String { rawValue }

        /// Adds one to `attempt`; what it returns keeps it.
        func add(to attempt: Attempt<Int, TestError>) -> Any {
            switch self {
            case .handler: attempt.upon(.immediate) { _ in }
            case .stageWithoutConsumers: return attempt.map(upon: .immediate) { $0 + 1 }
            case .successCallback: attempt.uponSuccess(.immediate) { _ in }
            case .futureView: return attempt.map(upon: .immediate) { $0 }.upon(.immediate) { _ in }
            }
            return ()
        }
    }

    @Test(arguments: Unbounded.allCases)
    func oneConsumerWithoutADeadlineMakesItNoneAndKeepsTheWorkGoing(_ unbounded: Unbounded) {
        let clock = VirtualTimeExecutor()
        let producer = Producer()
        let limited = producer.writer.attempt.deadline(at: clock.now + .seconds(5), on: clock)
        #expect(producer.writer.deadline(on: clock) == clock.now + .seconds(5))
        let kept = unbounded.add(to: producer.writer.attempt)
        #expect(producer.writer.deadline(on: clock) == nil)
        clock.advance(by: .seconds(5))
        #expect(limited.peek() == .failure(.cancelled))
        #expect(producer.stops.count == 0 && !producer.writer.isCancelled)
        withExtendedLifetime(kept) {}
    }

    @Test func aStageWithoutAConsumerCountsOnceItHasABoundedOne() {
        let clock = VirtualTimeExecutor()
        let producer = Producer()
        let stage = producer.writer.attempt.map(upon: .immediate) { $0 + 1 }
        #expect(producer.writer.deadline(on: clock) == nil, "a value may be read later")
        let limited = stage.deadline(at: clock.now + .seconds(3), on: clock)
        #expect(producer.writer.deadline(on: clock) == clock.now + .seconds(3))
        withExtendedLifetime(limited) {}
    }

    @Test func observersHearEachChangeInOrder() {
        let clock = VirtualTimeExecutor()
        let producer = Producer()
        let heard = Heard()
        producer.writer.onDeadlineChange(on: clock) { heard.append($0) }
        let start = clock.now
        let first = producer.writer.attempt.deadline(at: start + .seconds(5), on: clock)
        let second = producer.writer.attempt.deadline(at: start + .seconds(8), on: clock)
        let third = producer.writer.attempt.deadline(at: start + .seconds(6), on: clock)
        let plain = producer.writer.attempt.map(upon: .immediate) { $0 }
        #expect(heard.values == [start + .seconds(5), start + .seconds(8), nil])
        heard.reset()
        producer.writer.onDeadlineChange(on: clock) { heard.append($0) }
        #expect(heard.values.isEmpty, "a new observer hears nothing while there is none")
        withExtendedLifetime((first, second, third, plain)) {}
    }

    @Test func onDeadlineChangeStartsWithTheCurrentDeadline() {
        let producer = Producer()
        let deadline = ContinuousClock.now + .seconds(60)
        let limited = producer.writer.attempt.deadline(at: deadline)
        let heard = Deferred<ContinuousClock.Instant?>()
        producer.writer.onDeadlineChange { heard.fill(with: $0) }
        #expect(heard.peek() == .some(deadline))
        #expect(producer.writer.deadline == deadline)
        let remaining = producer.writer.remaining
        #expect(remaining.map { $0 > .seconds(59) && $0 <= .seconds(60) } == true)
        withExtendedLifetime(limited) {}
    }

    @Test func aDeadlineOnTheContinuousClockPassesOnTime() async {
        let producer = Producer()
        let limited = producer.writer.attempt.deadline(at: .now + .milliseconds(20))
        let result: Result<Int, TestError> = await limited.value
        #expect(result == .failure(.cancelled))
        #expect(producer.stops.count == 1 && producer.reason == .deadlinePassed)
    }

    // MARK: What the failure says

    enum Late: ExpirableError, CancellableError, Equatable {
        case cancelled, deadlinePassed
    }

    struct Plain: Error, Equatable {
        let code: Int
    }

    @Test func eachFailureTypeSaysTheDeadlinePassedAsItCan() {
        let clock = VirtualTimeExecutor()
        let anyError = DeferredAttempt<Int, any Error>()
        let expirable = DeferredAttempt<Int, Late>()
        let cancellable = DeferredAttempt<Int, TestError>()
        let given = DeferredAttempt<Int, Plain>(cancellationError: Plain(code: -1))
        let plain = DeferredAttempt<Int, Plain>()
        let deadline = clock.now + .seconds(1)
        let results = (
            anyError.attempt.deadline(at: deadline, on: clock),
            expirable.attempt.deadline(at: deadline, on: clock),
            cancellable.attempt.deadline(at: deadline, on: clock),
            given.attempt.deadline(at: deadline, on: clock),
            plain.attempt.deadline(at: deadline, on: clock, failingWith: Plain(code: 7))
        )
        clock.advance(by: .seconds(1))
        if case .failure(let error) = results.0.peek() {
            #expect(error is DeadlineError)
        } else {
            Issue.record("an `any Error` attempt fails with DeadlineError")
        }
        #expect(results.1.peek() == .failure(.deadlinePassed))
        #expect(results.2.peek() == .failure(.cancelled))
        #expect(results.3.peek() == .failure(Plain(code: -1)))
        #expect(results.4.peek() == .failure(Plain(code: 7)))
        #expect(DeadlineError.deadlinePassed == DeadlineError())
    }

    // MARK: Why the work stopped

    @Test func cancelHandlersLearnWhyTheWorkStopped() async {
        let clock = VirtualTimeExecutor()
        let byCancel = Producer()
        byCancel.writer.attempt.map(upon: .immediate) { $0 }.cancel()
        #expect(byCancel.reason == .cancelled)

        let byRelease = Producer()
        let other = DeferredAttempt<Int, TestError>()
        let first = [byRelease.writer.attempt, other.attempt].firstSucceeded()
        other.succeed(with: 1)
        #expect(first.peek() == .success(1))
        #expect(byRelease.reason == .unneeded, "the join that needed it settled without it")

        let byTimeout = Producer()
        let limited = byTimeout.writer.attempt.timeout(after: .seconds(1), upon: clock, failingWith: .timedOut)
        clock.advance(by: .seconds(1))
        #expect(limited.peek() == .failure(.timedOut))
        #expect(byTimeout.reason == .deadlinePassed, "a time limit is its consumer's deadline")

        let byTask = Producer()
        let task = Task { try await byTask.writer.attempt.get() }
        while !byTask.writer.attempt.isCancelled && byTask.stops.count == 0 {
            task.cancel()
            await Task.yield()
        }
        _ = await task.result
        #expect(byTask.reason == .cancelled)

        let late = Deferred<CancellationReason>()
        byCancel.writer.onCancel(reporting: { late.fill(with: $0) })
        #expect(late.peek() == .cancelled, "a handler added after the stop learns why at once")
        for producer in [byCancel, byRelease, byTimeout, byTask] {
            #expect(producer.stops.count == 1)
        }
    }

    @Test func aTimeoutCountsOnceTheProducerAsked() {
        let clock = VirtualTimeExecutor()
        let producer = Producer()
        #expect(producer.writer.deadline(on: clock) == nil)
        let limited = producer.writer.attempt.timeout(after: .seconds(3), upon: clock, failingWith: .timedOut)
        #expect(producer.writer.deadline(on: clock) == clock.now + .seconds(3))
        let below = limited.map(upon: .immediate) { $0 }.timeout(
            after: .seconds(2), upon: clock, failingWith: .timedOut)
        // Its one consumer needs it for as long as its own consumer does.
        #expect(producer.writer.deadline(on: clock) == clock.now + .seconds(2))
        withExtendedLifetime(below) {}
    }

    @Test func aDeadlineOnAnotherClockCountsAsNone() {
        let clock = VirtualTimeExecutor()
        let other = VirtualTimeExecutor()
        let producer = Producer()
        let first = producer.writer.attempt.deadline(at: clock.now + .seconds(5), on: clock)
        let second = producer.writer.attempt.deadline(at: other.now + .seconds(1), on: other)
        #expect(producer.writer.deadline(on: clock) == nil)
        #expect(producer.writer.deadline(on: other) == nil)
        other.advance(by: .seconds(1))
        #expect(producer.stops.count == 0, "the consumer on the virtual clock still needs it")
        withExtendedLifetime((first, second)) {}
    }

    @Test func aJoinPassesItsDeadlineToEveryInput() {
        let clock = VirtualTimeExecutor()
        let producers = [Producer(), Producer(), Producer()]
        let joined = producers.map { $0.writer.attempt }.allSucceeded().deadline(at: clock.now + .seconds(2), on: clock)
        for producer in producers {
            #expect(producer.writer.deadline(on: clock) == clock.now + .seconds(2))
        }
        producers[1].writer.succeed(with: 1)
        clock.advance(by: .seconds(2))
        #expect(joined.peek() == .failure(.cancelled))
        #expect(producers.map(\.reason) == [.deadlinePassed, nil, .deadlinePassed])
    }

    @Test func anAwaitingReaderWithoutADeadlineCountsAsNone() async throws {
        let clock = VirtualTimeExecutor()
        let producer = Producer()
        let limited = producer.writer.attempt.deadline(at: clock.now + .seconds(2), on: clock)
        let reader = Task { try await producer.writer.attempt.get() }
        while producer.writer.deadline(on: clock) != nil {
            await Task.yield()
        }
        producer.writer.succeed(with: 3)
        #expect(try await reader.value == 3)
        withExtendedLifetime(limited) {}
    }
}

/// What an observer heard, in order.
final class Heard: @unchecked Sendable {
    // @unchecked: `heard` is touched only under `lock`.
    private let lock = NSLock()
    private var heard: [VirtualTimeExecutor.Instant?] = []

    func append(_ instant: VirtualTimeExecutor.Instant?) {
        lock.withLock { heard.append(instant) }
    }

    func reset() {
        lock.withLock { heard = [] }
    }

    var values: [VirtualTimeExecutor.Instant?] {
        lock.withLock { heard }
    }
}

/// A deadline at the tail of a chain as deep as the test size says (a million stages at full
/// size), on the virtual clock: the producer reads it, and the chain stops at that instant,
/// not a nanosecond earlier, iteratively.
@Suite(.skippedUnderThreadSanitizer) struct DeadlineStackSafetyTests {
    /// One stage of each node the deadline crosses: a step, an owner, a join.
    static let kinds: [AttemptKind] = [.map, .andThen, .allSucceeded]

    /// The size of a chain of `kind`: the run's for `map` (a million deep at full size), the
    /// quick size for the others, whose nodes the stack-safety suites prove a million deep and
    /// whose walk through the ledger is the same loop (it keeps CI's stack-safety stage short).
    static func size(_ kind: AttemptKind) -> TestSize {
        kind == .map ? .current : TestSize(.quick)
    }

    @Test(arguments: kinds)
    func aDeadlineAtTheTailOfADeepChainStopsItAtThatInstant(_ kind: AttemptKind) async {
        let (read, before, after, reason) = await onDeepStack(
            "deadline under a \(kind) chain", size: Self.size(kind)
        ) {
            let clock = VirtualTimeExecutor()
            let queue = DispatchQueue(label: "delays")
            let producer = AttemptDeadlineTests.Producer()
            var tail = producer.writer.attempt
            for _ in 0..<Self.size(kind).depth {
                tail = kind.stage(after: tail, delayingOn: queue)
            }
            let deadline = clock.now + .seconds(30)
            let limited = tail.deadline(at: deadline, on: clock)
            let read = producer.writer.deadline(on: clock) == deadline
            clock.advance(by: .seconds(30) - .nanoseconds(1))
            let before = producer.stops.count
            clock.advance(by: .nanoseconds(1))
            let after = producer.stops.count
            withExtendedLifetime(limited) {}
            return (read, before, after, producer.reason)
        }
        #expect(read, "the producer reads the tail's deadline")
        #expect(before == 0 && after == 1 && reason == .deadlinePassed)
    }
}

/// A task awaiting `get()` under `Deadline.run` counts with its deadline; and an owner passes
/// its consumers' deadlines on to the attempt its step started.
@Suite struct DeadlineReaderTests {
    @Test func aTaskAwaitingUnderADeadlineCountsWithIt() async throws {
        let writer = HeldWriter<Int, any Error>()
        let deadline = ContinuousClock.now + .seconds(60)
        let seen = Deferred<ContinuousClock.Instant?>()
        writer.writer.onDeadlineChange { instant in
            if instant != nil {
                seen.fill(with: instant)
            }
        }
        let value = try await Deadline.run(until: deadline) {
            async let read = writer.attempt.get()
            _ = await seen.value
            writer.succeed(with: 5)
            return try await read
        }
        #expect(value == 5)
        #expect(seen.peek() == .some(deadline))
    }

    @Test func aTaskAwaitingWithoutADeadlineCountsAsNone() async throws {
        let writer = HeldWriter<Int, any Error>()
        let clock = VirtualTimeExecutor()
        let limited = writer.attempt.deadline(at: clock.now + .seconds(1), on: clock)
        let reader = Task { try await writer.attempt.get() }
        while writer.writer.deadline(on: clock) != nil {
            await Task.yield()
        }
        writer.succeed(with: 1)
        #expect(try await reader.value == 1)
        withExtendedLifetime(limited) {}
    }

    @Test func aStepThatStartsAnAttemptReadsItsConsumersDeadline() {
        let outer = DeferredAttempt<Int, TestError>()
        let seen = Deferred<ContinuousClock.Instant?>()
        let deadline = ContinuousClock.now + .seconds(60)
        let chained = outer.attempt.andThen(upon: .immediate) { (value: Int) -> Attempt<Int, TestError> in
            seen.fill(with: Deadline.current)
            return Attempt(succeededWith: value)
        }
        let limited = chained.deadline(at: deadline)
        outer.succeed(with: 1)
        #expect(seen.peek() == .some(deadline))
        #expect(limited.peek() == .success(1))
        #expect(Deadline.current == nil, "only while the step runs")
    }

    @Test func aRetryNeverWaitsOutABackoffThatEndsAfterTheDeadline() {
        let clock = VirtualTimeExecutor()
        let starts = Counter()
        let looped = Attempt<Int, TestError>.retry(attempts: 10, delay: .seconds(1), upon: clock) {
            Attempt(failedWith: .failed(starts.increment()))
        }
        let limited = looped.deadline(at: clock.now + .milliseconds(2_500), on: clock)
        clock.advance(by: .seconds(2))
        #expect(starts.value == 3, "at 0 s, 1 s and 2 s; a try at 3 s would come after the deadline")
        #expect(limited.peek() == .failure(.failed(2)), "the last try's failure, before the deadline")
    }

    @Test func aDelayPastItsConsumersDeadlineFailsAtOnce() {
        let clock = VirtualTimeExecutor()
        let source = DeferredAttempt<Int, any Error>()
        let late = source.attempt.delay(by: .seconds(3), upon: clock)
        let lateLimited = late.deadline(at: clock.now + .seconds(2), on: clock)
        let inTime = source.attempt.delay(by: .seconds(1), upon: clock)
        let inTimeLimited = inTime.deadline(at: clock.now + .seconds(2), on: clock)
        source.succeed(with: 4)
        if case .failure(let error) = late.peek() {
            #expect(error is DeadlineError, "nobody would take it after 3 s")
        } else {
            Issue.record("a delay past its consumers' deadline fails at once")
        }
        #expect(inTime.peek() == nil)
        clock.advance(by: .seconds(1))
        #expect((try? inTime.peek()?.get()) == 4)
        withExtendedLifetime((lateLimited, inTimeLimited)) {}
    }

    @Test func anOwnerPassesItsDeadlineToTheAttemptItsStepStarted() {
        let clock = VirtualTimeExecutor()
        let inner = AttemptDeadlineTests.Producer()
        let outer = DeferredAttempt<Int, TestError>()
        let chained = outer.attempt.andThen(upon: .immediate) { _ in inner.writer.attempt }
        let limited = chained.deadline(at: clock.now + .seconds(4), on: clock)
        #expect(outer.deadline(on: clock) == clock.now + .seconds(4))
        outer.succeed(with: 1)
        #expect(inner.writer.deadline(on: clock) == clock.now + .seconds(4))
        clock.advance(by: .seconds(4))
        #expect(limited.peek() == .failure(.cancelled))
        #expect(inner.stops.count == 1 && inner.reason == .deadlinePassed)
    }
}
