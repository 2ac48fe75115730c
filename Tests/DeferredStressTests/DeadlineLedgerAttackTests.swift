import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

// Attacks on deadlines that travel with demand (guarantees 18, 19): what a producer reads and
// hears, the stop and its reason, re-entrancy, memory, deep chains and races. Public API only.

/// A producer whose cancel handler records why it stopped, and how often.
private final class DLProducer: Sendable {
    static let reasons: [CancellationReason] = [.cancelled, .deadlinePassed, .unneeded]
    let writer = DeferredAttempt<Int, TestError>()
    let stops = Sighting()

    init() {
        writer.onCancel(reporting: { [stops] reason in stops.record(Self.reasons.firstIndex(of: reason)!) })
    }

    var attempt: Attempt<Int, TestError> { writer.attempt }

    var reason: CancellationReason? {
        stops.count == 0 ? nil : Self.reasons[stops.value]
    }
}

/// What an observer heard, in order.
private final class DLHeard: @unchecked Sendable {
    // @unchecked: `heard` is touched only under `lock`.
    private let lock = NSLock()
    private var heard: [VirtualTimeExecutor.Instant?] = []

    func append(_ instant: VirtualTimeExecutor.Instant?) {
        lock.withLock { heard.append(instant) }
    }

    var values: [VirtualTimeExecutor.Instant?] {
        lock.withLock { heard }
    }
}

/// Attempts kept by a round, behind an NSLock (Synchronization's Mutex reads as an access race
/// to ThreadSanitizer on Linux).
private final class DLKept: @unchecked Sendable {
    private let lock = NSLock()
    private var kept: [Attempt<Int, TestError>] = []
    func append(_ attempt: Attempt<Int, TestError>) { lock.withLock { kept.append(attempt) } }
    var values: [Attempt<Int, TestError>] { lock.withLock { kept } }
}

/// Whole seconds after the clock's start; -1 for `nil`.
private func dlSeconds(_ instant: VirtualTimeExecutor.Instant?) -> Int {
    instant.map { Int($0.sinceStart.components.seconds) } ?? -1
}

extension StressSuites {
    @Suite struct DeadlineLedgerAttackTests {
        // MARK: Owners must not pass on a deadline that bounded what they followed before

        /// An `andThen` after a deadline, with a consumer that waits as long as it takes: once it
        /// follows the attempt its step started, nothing bounds that attempt.
        @Test func anAndThenAfterADeadlineDoesNotBoundTheAttemptItsStepStarted() {
            let clock = VirtualTimeExecutor()
            let first = DLProducer()
            let second = DLProducer()
            let chained = first.attempt.deadline(at: clock.now + .seconds(5), on: clock)
                .andThen(upon: .immediate) { _ in second.attempt }
            chained.upon(.immediate) { _ in }
            first.writer.succeed(with: 1)
            #expect(
                second.writer.deadline(on: clock) == nil,
                "a handler on the andThen waits for the second attempt as long as it takes")
            clock.advance(by: .seconds(6))
            #expect(second.stops.count == 0 && chained.peek() == nil)
        }

        /// The same with a consumer with a later deadline: the second attempt is needed until 9 s.
        @Test func anAndThenAfterADeadlinePassesOnItsConsumersLaterDeadline() {
            let clock = VirtualTimeExecutor()
            let first = DLProducer()
            let second = DLProducer()
            let chained = first.attempt.deadline(at: clock.now + .seconds(5), on: clock)
                .andThen(upon: .immediate) { _ in second.attempt }
            let limited = chained.deadline(at: clock.now + .seconds(9), on: clock)
            first.writer.succeed(with: 1)
            #expect(
                second.writer.deadline(on: clock) == clock.now + .seconds(9),
                "never earlier than the 9 s consumer that needs it (guarantee 18)")
            clock.advance(by: .seconds(6))
            #expect(second.stops.count == 0, "still needed until 9 s")
            clock.advance(by: .seconds(3))
            #expect(second.reason == .deadlinePassed)
            withExtendedLifetime(limited) {}
        }

        /// "Try the primary until its deadline, then the fallback": the fallback's producer must
        /// not read the primary's deadline, which has passed.
        @Test func aFallbackAfterAPassedDeadlineDoesNotTellItsProducerThatDeadline() {
            let clock = VirtualTimeExecutor()
            let primary = DLProducer()
            let backup = DLProducer()
            let heard = DLHeard()
            backup.writer.onDeadlineChange(on: clock) { heard.append($0) }
            let result = primary.attempt.deadline(at: clock.now + .seconds(5), on: clock)
                .fallback(upon: .immediate) { _ in backup.attempt }
            result.upon(.immediate) { _ in }
            clock.advance(by: .seconds(5))
            #expect(primary.reason == .deadlinePassed)
            #expect(
                backup.writer.deadline(on: clock) == nil,
                "the fallback's handler waits as long as it takes; read \(String(describing: backup.writer.deadline(on: clock)))"
            )
            #expect(heard.values.allSatisfy { $0 == nil }, "heard \(heard.values)")
        }

        /// The same with a `timeout` that counts because the producer asked first.
        @Test func aFallbackAfterATimeoutDoesNotTellItsProducerThatTimeout() {
            let clock = VirtualTimeExecutor()
            let primary = DLProducer()
            let backup = DLProducer()
            _ = primary.writer.deadline(on: clock)  // The producer asks: the timeout counts.
            let result = primary.attempt.timeout(after: .seconds(3), upon: clock, failingWith: .timedOut)
                .fallback(upon: .immediate) { _ in backup.attempt }
            result.upon(.immediate) { _ in }
            clock.advance(by: .seconds(3))
            #expect(backup.writer.deadline(on: clock) == nil)
        }

        /// A timeout set after the producer asked, on a stage made before it asked, is not counted
        /// (as documented: a `timeout` counts where it is set on a tracked attempt); a stage made
        /// after the producer asked is tracked, and its timeout counts.
        @Test func aTimeoutCountsOnlyWhereItIsSetOnATrackedAttempt() {
            let clock = VirtualTimeExecutor()
            let producer = DLProducer()
            let early = producer.attempt.map(upon: .immediate) { $0 + 1 }
            #expect(producer.writer.deadline(on: clock) == nil)  // The producer asks.
            let untracked = early.timeout(after: .seconds(3), upon: clock, failingWith: .timedOut)
            #expect(producer.writer.deadline(on: clock) == nil, "never earlier: none")
            let late = producer.attempt.map(upon: .immediate) { $0 + 1 }
            let tracked = late.timeout(after: .seconds(3), upon: clock, failingWith: .timedOut)
            #expect(producer.writer.deadline(on: clock) == nil, "the early stage still needs it, without a deadline")
            untracked.cancel()  // The early stage goes with it.
            #expect(producer.writer.deadline(on: clock) == clock.now + .seconds(3))
            withExtendedLifetime(tracked) {}
        }

        /// A retry whose first try had a short deadline and whose second has a long one.
        @Test func aRetryDoesNotKeepTheDeadlineOfItsFirstTry() {
            let clock = VirtualTimeExecutor()
            let tries = [DLProducer(), DLProducer()]
            let count = Counter()
            let start = clock.now
            let retried = Attempt<Int, TestError>.retry(attempts: 2, upon: clock) {
                let index = count.increment()
                let until = index == 0 ? start + .seconds(2) : start + .seconds(20)
                return tries[index].attempt.deadline(at: until, on: clock)
            }
            let limited = retried.deadline(at: start + .seconds(30), on: clock)
            #expect(tries[0].writer.deadline(on: clock) == start + .seconds(2))
            tries[0].writer.fail(with: .failed(1))
            clock.advance(by: .zero)
            #expect(count.value == 2)
            #expect(
                tries[1].writer.deadline(on: clock) == start + .seconds(20),
                "the second try is needed until its own 20 s deadline")
            withExtendedLifetime(limited) {}
        }

        // MARK: Why the work stopped

        /// A task awaiting under `Deadline.run` whose deadline passes: the reason names it.
        @Test func aReaderUnderDeadlineRunWhoseDeadlinePassesStopsTheWorkWithDeadlinePassed() async {
            let producer = DLProducer()
            let started = Deferred<Void>()
            producer.writer.onDeadlineChange { if $0 != nil { started.fill(with: ()) } }
            do {
                _ = try await Deadline.run(until: .now + .milliseconds(200)) {
                    try await producer.attempt.get()
                }
                Issue.record("the deadline passed first")
            } catch {
                #expect(error is DeadlineError)
            }
            while producer.stops.count == 0 {
                try? await Task.sleep(for: .milliseconds(5))
            }
            #expect(producer.stops.count == 1)
            #expect(
                producer.reason == .deadlinePassed,
                "CancellationReason.deadlinePassed: 'or of a caller under Deadline.run'; got \(String(describing: producer.reason))"
            )
        }

        /// A deadline that has passed as it is set: decided, and the work stopped, before
        /// `deadline(at:)` returns, whatever clock measures it.
        @Test func aDeadlinePassedAlreadyFailsAtOnceAndStopsTheWorkOnce() async {
            let clock = VirtualTimeExecutor()
            let producer = DLProducer()
            clock.advance(by: .seconds(10))
            let limited = producer.attempt.deadline(at: clock.now.advanced(by: .seconds(-3)), on: clock)
            #expect(limited.peek() == .failure(.cancelled), "without the clock running")
            #expect(producer.stops.count == 1 && producer.reason == .deadlinePassed)
            #expect(producer.writer.deadline(on: clock) == nil)
            clock.advance(by: .zero)
            #expect(producer.stops.count == 1)

            let onContinuous = DLProducer()
            let late = onContinuous.attempt.deadline(at: .now - .seconds(1))
            #expect(late.peek() == .failure(.cancelled), "without the deadlines' queue")
            #expect(onContinuous.stops.count == 1 && onContinuous.reason == .deadlinePassed)
            let result = await late.value
            #expect(result == .failure(.cancelled))
            #expect(onContinuous.stops.count == 1 && onContinuous.reason == .deadlinePassed)
        }

        enum Late: ExpirableError, Equatable {
            case deadlinePassed, other
        }

        struct Plain: Error, Equatable {
            let code: Int
        }

        /// A failure type without a cancellation error: the work is told, once, and may still
        /// fill; an ExpirableError without a cancellation error.
        @Test func typedFailuresWithoutACancellationError() {
            let clock = VirtualTimeExecutor()
            let plain = DeferredAttempt<Int, Plain>()
            let reasons = Mutex<[CancellationReason]>([])
            plain.onCancel(reporting: { reason in reasons.withLock { $0.append(reason) } })
            let limited = plain.attempt.deadline(at: clock.now + .seconds(1), on: clock, failingWith: Plain(code: 7))
            let stage = limited.map(upon: .immediate) { $0 + 1 }.deadline(
                at: clock.now + .seconds(2), on: clock, failingWith: Plain(code: 8))
            #expect(plain.deadline(on: clock) == clock.now + .seconds(1))
            clock.advance(by: .seconds(1))
            #expect(limited.peek() == .failure(Plain(code: 7)))
            #expect(reasons.withLock { $0 } == [.deadlinePassed])
            #expect(plain.deadline(on: clock) == nil)
            let filled = plain.succeed(with: 3)
            #expect(filled, "a producer without a cancellation error may still fill")
            clock.advance(by: .seconds(1))
            #expect(stage.peek() == .failure(Plain(code: 7)))

            let expirable = DeferredAttempt<Int, Late>()
            let expired = expirable.attempt.deadline(at: clock.now + .seconds(1), on: clock)
            clock.advance(by: .seconds(1))
            #expect(expired.peek() == .failure(.deadlinePassed))
            #expect(reasons.withLock { $0 }.count == 1)
        }

        // MARK: Re-entrancy

        /// Observers and cancel handlers that come back to the API: nothing deadlocks.
        ///
        /// They read, add consumers, observe and cancel; the work stops once.
        @Test func observersAndCancelHandlersThatComeBack() {
            let finished = returnsOnAThread(within: 60) {
                let clock = VirtualTimeExecutor()
                let producer = DLProducer()
                let extra = Mutex<[Attempt<Int, TestError>]>([])
                let depth = Counter()
                let readings = Counter()
                producer.writer.onDeadlineChange(on: clock) { instant in
                    _ = producer.writer.deadline(on: clock)
                    _ = producer.writer.remaining
                    readings.increment()
                    if depth.increment() <= 3 {
                        // A consumer with a later deadline, from inside the observer.
                        let more = producer.attempt.map(upon: .immediate) { $0 }
                            .deadline(at: clock.now + .seconds(20), on: clock)
                        extra.withLock { $0.append(more) }
                        producer.writer.onDeadlineChange(on: clock) { _ in
                            _ = producer.writer.deadline(on: clock)
                        }
                    }
                }
                producer.writer.onCancel(reporting: { _ in
                    _ = producer.writer.deadline(on: clock)
                    producer.writer.onDeadlineChange(on: clock) { _ in }
                    let late = producer.attempt.deadline(at: clock.now + .seconds(1), on: clock)
                    late.cancel()
                    producer.attempt.cancel()
                    _ = producer.attempt.map(upon: .immediate) { $0 }.deadline(
                        at: clock.now + .seconds(2), on: clock)
                })
                let limited = producer.attempt.deadline(at: clock.now + .seconds(5), on: clock)
                #expect(readings.value >= 1)
                #expect(producer.writer.deadline(on: clock) == clock.now + .seconds(20))
                limited.cancel()
                for attempt in extra.withLock({ $0 }) {
                    attempt.cancel()
                }
                #expect(producer.stops.count == 1 && producer.reason == .cancelled)
                #expect(producer.writer.deadline(on: clock) == nil)
                clock.advance(by: .seconds(30))
            }
            #expect(finished, "deadlocked")
        }

        /// An observer that cancels the consumer whose arrival it hears, and an observer that
        /// succeeds the work.
        @Test func observersThatCancelAndSucceed() {
            let finished = returnsOnAThread(within: 60) {
                let clock = VirtualTimeExecutor()
                let producer = DLProducer()
                let consumers = Mutex<[Attempt<Int, TestError>]>([])
                producer.writer.onDeadlineChange(on: clock) { instant in
                    if instant != nil {
                        for consumer in consumers.withLock({ $0 }) {
                            consumer.cancel()
                        }
                    }
                }
                let first = producer.attempt.map(upon: .immediate) { $0 }
                consumers.withLock { $0.append(first) }
                let limited = first.deadline(at: clock.now + .seconds(3), on: clock)
                #expect(limited.peek() == .failure(.cancelled))
                #expect(producer.stops.count == 1 && producer.reason == .cancelled)

                let other = DLProducer()
                other.writer.onDeadlineChange(on: clock) { instant in
                    if instant != nil {
                        _ = other.writer.succeed(with: 4)
                    }
                }
                let result = other.attempt.deadline(at: clock.now + .seconds(3), on: clock)
                #expect(result.peek() == .success(4))
                #expect(other.stops.count == 0)
            }
            #expect(finished, "deadlocked")
        }

        // MARK: Memory

        /// Chains with deadlines, tracked from the start (the producer asks first), released
        /// unfinished, before their deadlines pass: nothing they captured stays alive.
        @Test func chainsReleasedUnfinishedKeepNothing() {
            let live = LiveCount()
            let queue = DispatchQueue(label: "delays")
            let kinds: [AttemptKind] = [
                .map, .andThen, .fallback, .retry, .timeout, .allSucceeded, .firstSucceeded, .shared, .recover,
            ]
            do {
                let clock = VirtualTimeExecutor()
                for round in 0..<TestSize.attackLoop(3_000) {
                    let writer = DeferredAttempt<Int, TestError>()
                    let tracked = LifetimeTracked(live)
                    writer.onDeadlineChange(on: clock) { _ in withExtendedLifetime(tracked) {} }
                    let captured = LifetimeTracked(live)
                    writer.onCancel { withExtendedLifetime(captured) {} }
                    if round % 2 == 0 {
                        _ = writer.deadline(on: clock)
                    }
                    var tail = writer.attempt
                    for level in 0..<4 {
                        let kept = LifetimeTracked(live)
                        tail = kinds[(round + level) % kinds.count].stage(after: tail, delayingOn: queue)
                            .map(upon: .immediate) { value in withExtendedLifetime(kept) { value } }
                        if level % 2 == round % 2 {
                            tail = tail.deadline(at: clock.now + .seconds(Int64(10 + level)), on: clock)
                        }
                    }
                    _ = writer.deadline(on: clock)
                    if round % 3 == 0 {
                        tail.upon(.immediate) { _ in }
                    }
                    if round % 5 == 1 {
                        tail.cancel()
                    }
                }
                clock.advance(by: .seconds(60))
            }
            queue.sync {}
            #expect(live.value == 0, "\(live.value) captures kept alive")
        }

        /// A loop of tracked attempts finished or cancelled (300,000 rounds in the release stage)
        /// keeps resident memory flat (records, observers).
        @Test(.disabled(if: TestSize.underSanitizer))
        func trackedAttemptsDoNotGrowMemory() {
            let clock = VirtualTimeExecutor()
            func cycle(_ rounds: Int) {
                for round in 0..<rounds {
                    let writer = DeferredAttempt<Int, TestError>()
                    writer.onDeadlineChange(on: clock) { _ in }
                    let stage = writer.attempt.map(upon: .immediate) { $0 + 1 }
                    let limited = stage.deadline(at: clock.now + .seconds(100), on: clock)
                    let plain = writer.attempt.filter(upon: .immediate, failingWith: .failed(1)) { _ in true }
                    switch round % 3 {
                    case 0: _ = writer.succeed(with: 1)
                    case 1: limited.cancel()
                    default: break
                    }
                    withExtendedLifetime((limited, plain)) {}
                    clock.advance(by: .seconds(200))
                }
            }
            cycle(30_000)
            let before = residentMemory() ?? 0
            // A record kept per round would grow it by some 20 MB at the quick size.
            cycle(TestSize.attackLoop(300_000))
            let after = residentMemory() ?? 0
            print("tracked attempts: resident memory \(before >> 10) KiB -> \(after >> 10) KiB")
            #expect(after - before < 8 << 20, "grew by \((after - before) >> 10) KiB")
        }

        // MARK: Deep chains

        /// A 20,000-deep chain of mixed kinds with deadlines on many levels, the producer asking
        /// first, then released unfinished; then one that reaches its deadline.
        @Test(.skippedUnderThreadSanitizer) func deepMixedChainsWithDeadlines() async {
            // No `.timeout`: on a StoppedClock its limit is a deadline on the continuous clock,
            // which makes the virtual-clock deadlines below it count as none once tracked.
            let kinds: [AttemptKind] = [.map, .andThen, .allSucceeded, .fallback, .recover, .shared, .retry]
            let (read, stopsBefore, stopsAfter, reason, liveAfter) = await onDeepStack(
                "deep mixed deadlines", size: TestSize.attack
            ) {
                let live = LiveCount()
                let clock = VirtualTimeExecutor()
                let queue = DispatchQueue(label: "delays")
                var read = false
                var stopsBefore = -1
                var stopsAfter = -1
                var reason: CancellationReason?
                do {
                    // Released unfinished.
                    let producer = DLProducer()
                    let kept = LifetimeTracked(live)
                    producer.writer.onDeadlineChange(on: clock) { _ in withExtendedLifetime(kept) {} }
                    var tail = producer.attempt
                    for level in 0..<TestSize.attack.depth {
                        tail = kinds[level % kinds.count].stage(after: tail, delayingOn: queue)
                        if level % 1_000 == 999 {
                            tail = tail.deadline(at: clock.now + .seconds(Int64(1_000 + level)), on: clock)
                        }
                    }
                    _ = tail.deadline(at: clock.now + .seconds(50_000), on: clock)
                }
                clock.advance(by: .zero)
                do {
                    let producer = DLProducer()
                    _ = producer.writer.deadline(on: clock)
                    var tail = producer.attempt
                    for level in 0..<TestSize.attack.depth {
                        tail = kinds[level % kinds.count].stage(after: tail, delayingOn: queue)
                    }
                    let deadline = clock.now + .seconds(30)
                    let limited = tail.deadline(at: deadline, on: clock)
                    read = producer.writer.deadline(on: clock) == deadline
                    clock.advance(by: .seconds(30) - .nanoseconds(1))
                    stopsBefore = producer.stops.count
                    clock.advance(by: .nanoseconds(1))
                    stopsAfter = producer.stops.count
                    reason = producer.reason
                    withExtendedLifetime(limited) {}
                }
                queue.sync {}
                return (read, stopsBefore, stopsAfter, reason, live.value)
            }
            #expect(read)
            #expect(stopsBefore == 0 && stopsAfter == 1 && reason == .deadlinePassed)
            #expect(liveAfter == 0)
        }

        // MARK: Races

        final class Reading: Sendable {
            private let seconds = Atomic<Int>(-2)
            func record(_ instant: VirtualTimeExecutor.Instant?) {
                seconds.store(dlSeconds(instant), ordering: .releasing)
            }
            var value: Int { seconds.load(ordering: .acquiring) }
        }

        /// A handler pinning against a 9 s consumer arriving, over a producer with a 5 s consumer.
        ///
        /// The producer reads on both sides; observers hear the final state last.
        final class PinRound: Sendable {
            let clock = VirtualTimeExecutor()
            fileprivate let producer = DLProducer()
            fileprivate let heard = DLHeard()
            let five: Attempt<Int, TestError>
            let nine = Deferred<Attempt<Int, TestError>>()
            let left = Reading()
            let right = Reading()

            init() {
                producer.writer.onDeadlineChange(on: clock) { [heard] in heard.append($0) }
                five = producer.attempt.deadline(at: clock.now + .seconds(5), on: clock)
            }
        }

        @Test func aHandlerPinningAgainstABoundedConsumerArriving() {
            RaceHarness.expectInterleavings(
                "handler pins against a bounded consumer",
                rounds: TestSize.attack.raceRounds,
                expected: ["nine read first", "none read first"],
                setup: PinRound.init,
                left: { round in
                    round.producer.attempt.upon(.immediate) { _ in }
                    round.left.record(round.producer.writer.deadline(on: round.clock))
                },
                right: { round in
                    round.nine.fill(
                        with: round.producer.attempt.deadline(at: round.clock.now + .seconds(9), on: round.clock))
                    round.right.record(round.producer.writer.deadline(on: round.clock))
                },
                classify: { round in
                    #expect(round.left.value == -1, "a handler needs it")
                    #expect([-1, 9].contains(round.right.value))
                    #expect(round.producer.writer.deadline(on: round.clock) == nil)
                    let heard = round.heard.values
                    #expect(heard.first == round.clock.now + .seconds(5))
                    #expect(heard.last == .some(nil), "the last heard must be the current: \(heard)")
                    return round.right.value == 9 ? "nine read first" : "none read first"
                })
        }

        /// Two callers of a shared run, each with a deadline, join at once; the producer observes.
        final class SharedRound: Sendable {
            let clock = VirtualTimeExecutor()
            let table = SharedAttempts<Int, Int, TestError>()
            fileprivate let producer = DLProducer()
            fileprivate let heard = DLHeard()
            let first: Attempt<Int, TestError>
            fileprivate let callers = DLKept()
            let left = Reading()
            let right = Reading()

            init() {
                producer.writer.onDeadlineChange(on: clock) { [heard] in heard.append($0) }
                let producer = producer
                first = table.attempt(for: 1) { _ in producer.attempt }.deadline(
                    at: clock.now + .seconds(5), on: clock)
            }
        }

        @Test func sharedRunCallersWithDeadlinesJoiningAndLeaving() {
            RaceHarness.expectInterleavings(
                "shared run callers",
                rounds: TestSize.attack.raceRounds,
                // Kept: the 9 s caller joined the run before the first caller left (whether the
                // left side then read 9 s or, while it was joining, none).
                expected: ["kept", "restarted"],
                setup: SharedRound.init,
                left: { round in
                    let caller = round.table.attempt(for: 1) { _ in Attempt(failedWith: .failed(-9)) }
                        .deadline(at: round.clock.now + .seconds(9), on: round.clock)
                    round.callers.append(caller)
                    round.left.record(round.producer.writer.deadline(on: round.clock))
                },
                right: { round in
                    round.first.cancel()
                    round.right.record(round.producer.writer.deadline(on: round.clock))
                },
                classify: { round in
                    // The 9 s caller needs the run from when it joined until it leaves; if the
                    // first caller left first, the run ended and the 9 s caller started another.
                    let restarted = round.producer.stops.count == 1
                    if restarted {
                        #expect(round.producer.reason == .cancelled)
                        #expect(round.left.value == -1, "left read \(round.left.value)")
                        return "restarted"
                    }
                    #expect([-1, 9].contains(round.left.value), "left read \(round.left.value)")
                    #expect([-1, 5, 9].contains(round.right.value))
                    #expect(round.producer.writer.deadline(on: round.clock) == round.clock.now + .seconds(9))
                    let heard = round.heard.values
                    #expect(heard.last == round.clock.now + .seconds(9), "heard \(heard)")
                    round.clock.advance(by: .seconds(9))
                    #expect(round.producer.stops.count == 1 && round.producer.reason == .deadlinePassed)
                    return "kept"
                })
        }

        /// The deadline passes on one thread while the producer succeeds on the other.
        final class FireRound: Sendable {
            let clock = VirtualTimeExecutor()
            fileprivate let producer = DLProducer()
            let limited: Attempt<Int, TestError>
            let mapped: Attempt<Int, TestError>
            let succeeded = Atomic<Int>(-1)
            let sawOnDelivery = Sighting()

            init() {
                let producer = producer
                limited = producer.attempt.map(upon: .immediate) { $0 + 1 }
                    .deadline(at: clock.now + .seconds(5), on: clock)
                mapped = limited.map(upon: .immediate) { $0 }
                let sighting = sawOnDelivery
                limited.upon(.immediate) { _ in
                    sighting.record(producer.attempt.isCancelled || producer.attempt.peek() != nil ? 1 : 0)
                }
            }
        }

        @Test func aDeadlinePassingAgainstSucceed() {
            RaceHarness.expectInterleavings(
                "deadline against succeed",
                rounds: TestSize.attack.raceRounds,
                expected: ["deadline first", "success first"],
                setup: FireRound.init,
                left: { round in round.clock.advance(by: .seconds(5)) },
                right: { round in
                    round.succeeded.store(round.producer.writer.succeed(with: 1) ? 1 : 0, ordering: .releasing)
                },
                classify: { round in
                    let succeeded = round.succeeded.load(ordering: .acquiring) == 1
                    #expect(round.producer.stops.count <= 1)
                    #expect((round.producer.stops.count == 1) == !succeeded)
                    if round.producer.stops.count == 1 {
                        #expect(round.producer.reason == .deadlinePassed)
                    }
                    #expect(round.sawOnDelivery.count == 1 && round.sawOnDelivery.value == 1)
                    #expect(round.producer.writer.deadline(on: round.clock) == nil)
                    return succeeded ? "success first" : "deadline first"
                })
        }

        /// Consumers coming and going while the producer observes.
        ///
        /// Consumers with deadlines leave by cancel on one side while a reader without a deadline
        /// (a stage without consumers) and one with arrive on the other. The last value heard is
        /// always the one it reads at the end.
        final class ChurnRound: Sendable {
            let clock = VirtualTimeExecutor()
            fileprivate let producer = DLProducer()
            fileprivate let heard = DLHeard()
            let a: Attempt<Int, TestError>
            let b: Attempt<Int, TestError>
            fileprivate let added = DLKept()
            let left = Reading()
            let right = Reading()

            init() {
                producer.writer.onDeadlineChange(on: clock) { [heard] in heard.append($0) }
                a = producer.attempt.map(upon: .immediate) { $0 }.deadline(at: clock.now + .seconds(4), on: clock)
                b = producer.attempt.andThen(upon: .immediate) { Attempt(succeededWith: $0) }
                    .deadline(at: clock.now + .seconds(6), on: clock)
            }
        }

        @Test func consumersChurningWhileTheProducerObserves() {
            RaceHarness.expectInterleavings(
                "consumers churn",
                rounds: TestSize.attack.raceRounds,
                expected: ["seven read", "other"],
                setup: ChurnRound.init,
                left: { round in
                    round.b.cancel()
                    let plain = round.producer.attempt.map(upon: .immediate) { $0 }
                    round.left.record(round.producer.writer.deadline(on: round.clock))
                    round.added.append(plain)
                    // A bounded consumer below the plain stage makes it bounded again.
                    let below = plain.deadline(at: round.clock.now + .seconds(3), on: round.clock)
                    round.added.append(below)
                },
                right: { round in
                    let seven = [round.producer.attempt].allSucceeded().map(upon: .immediate) { $0[0] }
                        .deadline(at: round.clock.now + .seconds(7), on: round.clock)
                    round.added.append(seven)
                    round.right.record(round.producer.writer.deadline(on: round.clock))
                },
                classify: { round in
                    // Consumers at the end: a (4 s), plain stage bounded by 3 s, join at 7 s.
                    #expect([-1, 4, 6, 7].contains(round.left.value), "left \(round.left.value)")
                    #expect([-1, 7].contains(round.right.value), "right \(round.right.value)")
                    let now = round.producer.writer.deadline(on: round.clock)
                    #expect(now.map { $0 >= round.clock.now + .seconds(7) } == true, "read \(String(describing: now))")
                    let heard = round.heard.values
                    #expect(heard.last == .some(now), "heard \(heard), reads \(String(describing: now))")
                    round.clock.advance(by: .seconds(6))
                    #expect(round.producer.stops.count == 0, "the 7 s join still needs it")
                    round.clock.advance(by: .seconds(1))
                    #expect(round.producer.stops.count == 1 && round.producer.reason == .deadlinePassed)
                    return round.right.value == 7 ? "seven read" : "other"
                })
        }

        /// The producer registers its first observer on one side while a consumer with a
        /// deadline arrives on the other: it hears that deadline, and last what it reads.
        final class ObserveRound: Sendable {
            let clock = VirtualTimeExecutor()
            fileprivate let producer = DLProducer()
            fileprivate let heard = DLHeard()
            let limited = Deferred<Attempt<Int, TestError>>()
        }

        @Test func theFirstObserverAgainstTheFirstConsumer() {
            RaceHarness.expectInterleavings(
                "first observer against first consumer",
                rounds: TestSize.attack.raceRounds,
                expected: ["heard"],
                setup: ObserveRound.init,
                left: { round in
                    round.producer.writer.onDeadlineChange(on: round.clock) { [heard = round.heard] in heard.append($0)
                    }
                },
                right: { round in
                    round.limited.fill(
                        with: round.producer.attempt.map(upon: .immediate) { $0 }
                            .deadline(at: round.clock.now + .seconds(5), on: round.clock))
                },
                classify: { round in
                    let heard = round.heard.values
                    #expect(heard.last == round.clock.now + .seconds(5), "heard \(heard)")
                    #expect(heard.allSatisfy { $0 == nil || $0 == round.clock.now + .seconds(5) })
                    return "heard"
                })
        }

        /// A join's other input settles on one side while the producer reads on the other.
        final class JoinRound: Sendable {
            let clock = VirtualTimeExecutor()
            fileprivate let producer = DLProducer()
            let other = HeldWriter<Int, TestError>()
            let joined: Attempt<[Int], TestError>
            let reading = Reading()

            init() {
                joined = [producer.attempt, other.attempt].allSucceeded().deadline(
                    at: clock.now + .seconds(5), on: clock)
            }
        }

        @Test func aJoinsOtherInputSettlingAgainstTheProducerReading() {
            RaceHarness.expectInterleavings(
                "join input settles against reading",
                rounds: TestSize.attack.raceRounds,
                expected: ["read"],
                setup: JoinRound.init,
                left: { round in _ = round.other.succeed(with: 1) },
                right: { round in round.reading.record(round.producer.writer.deadline(on: round.clock)) },
                classify: { round in
                    #expect(round.reading.value == 5, "the join needs it until 5 s; read \(round.reading.value)")
                    #expect(round.producer.writer.deadline(on: round.clock) == round.clock.now + .seconds(5))
                    return "read"
                })
        }
    }
}
