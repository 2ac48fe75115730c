import Deferred
import Dispatch
import Synchronization
import TestSupport
import Testing

/// Every operator that takes a closure runs it only on the executor it names, and only for a
/// result that happened: a closure for failures never runs on a success, one for values never on
/// a failure, and none runs at the moment the operator is called.
@Suite struct AttemptClosurePlacementTests {
    /// A plain failure type: no cancellation error of its own.
    struct Plain: Error, Equatable {
        let code: Int
    }

    /// What a closure is for.
    enum Role: Sendable {
        /// Runs only for a value.
        case value
        /// Runs only for a failure.
        case failure
        /// Runs whatever the result (the start of a retry).
        case any

        /// The role's bit in ``Runs``.
        var bit: Int {
            switch self {
            case .value: 1
            case .failure: 2
            case .any: 4
            }
        }
    }

    /// A serial queue that its bodies can recognise.
    final class MarkedQueue: Sendable {
        let queue = DispatchQueue(label: "closure placement")
        private let key = DispatchSpecificKey<Bool>()

        init() {
            queue.setSpecific(key: key, value: true)
        }

        var isCurrent: Bool {
            DispatchQueue.getSpecific(key: key) == true
        }

        /// Returns once every body submitted so far, and every body those submitted, has run.
        func drain() {
            for _ in 0..<4 {
                queue.sync {}
            }
        }
    }

    /// The closures that ran: their roles, and whether each ran on the queue.
    final class Runs: Sendable {
        private let roles = Atomic<Int>(0)
        private let offQueue = Atomic<Int>(0)

        func record(_ role: Role, onQueue: Bool) {
            roles.bitwiseOr(role.bit, ordering: .relaxed)
            if !onQueue {
                offQueue.add(1, ordering: .relaxed)
            }
        }

        func ran(_ role: Role) -> Bool {
            roles.load(ordering: .relaxed) & role.bit != 0
        }

        var anyRan: Bool { roles.load(ordering: .relaxed) != 0 }
        var ranOffQueue: Int { offQueue.load(ordering: .relaxed) }
    }

    /// Every public operator of an attempt that takes a closure, with the roles of its closures.
    enum Operator: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case map, mapThrowing, mapErrorIntoCancellable, mapErrorIntoAnyError, mapErrorIntoPlain
        case mapErrorCancellingWith, recover, recoverThrowing, andThen, andThenThrowing, fallback
        case fallbackIntoCancellable, fallbackIntoAnyError, filter, reduce, firstWhere, retry
        case uponSuccess, uponFailure

        var testDescription: String { rawValue }

        /// Applies the operator to `source`, with closures that record into `runs`; returns what
        /// to cancel, and something that finishes once the operator's own work is done.
        func apply(to source: Attempt<Int, TestError>, on marked: MarkedQueue, recording runs: Runs) -> Stage {
            let queue = marked.queue
            @Sendable func note(_ role: Role) { runs.record(role, onQueue: marked.isCurrent) }
            switch self {
            case .map:
                return Stage(
                    source.map(upon: queue) {
                        note(.value)
                        return $0
                    })
            case .mapThrowing:
                return Stage(
                    source.map(upon: queue) { value throws(TestError) in
                        note(.value)
                        return value
                    })
            case .mapErrorIntoCancellable:
                return Stage(
                    source.mapError(upon: queue) {
                        note(.failure)
                        return WrappedTestError.wrapped($0)
                    })
            case .mapErrorIntoAnyError:
                return Stage(
                    source.mapError(upon: queue) { error -> any Error in
                        note(.failure)
                        return error
                    })
            case .mapErrorIntoPlain:
                return Stage(
                    source.mapError(upon: queue) {
                        note(.failure)
                        return Plain(code: $0 == .cancelled ? 0 : 1)
                    })
            case .mapErrorCancellingWith:
                return Stage(
                    source.mapError(upon: queue, cancellingWith: Plain(code: -1)) { _ in
                        note(.failure)
                        return Plain(code: 1)
                    })
            case .recover:
                return Stage(
                    source.recover(upon: queue) { _ in
                        note(.failure)
                        return 0
                    })
            case .recoverThrowing:
                return Stage(
                    source.recover(upon: queue) { error throws(TestError) in
                        note(.failure)
                        throw error
                    })
            case .andThen:
                return Stage(
                    source.andThen(upon: queue) {
                        note(.value)
                        return Attempt(succeededWith: $0)
                    })
            case .andThenThrowing:
                return Stage(
                    source.andThen(upon: queue) { value throws(TestError) -> Attempt<Int, TestError> in
                        note(.value)
                        return Attempt(succeededWith: value)
                    })
            case .fallback:
                return Stage(
                    source.fallback(upon: queue) {
                        note(.failure)
                        return Attempt(failedWith: $0)
                    })
            case .fallbackIntoCancellable:
                return Stage(
                    source.fallback(upon: queue) { error -> Attempt<Int, WrappedTestError> in
                        note(.failure)
                        return Attempt(failedWith: .wrapped(error))
                    })
            case .fallbackIntoAnyError:
                return Stage(
                    source.fallback(upon: queue) { error -> Attempt<Int, any Error> in
                        note(.failure)
                        return Attempt(failedWith: error)
                    })
            case .filter:
                return Stage(
                    source.filter(upon: queue, failingWith: .failed(0)) { _ in
                        note(.value)
                        return true
                    })
            case .reduce:
                return Stage(
                    [source].reduce(0, upon: queue) {
                        note(.value)
                        return $0 + $1
                    })
            case .firstWhere:
                return Stage(
                    [source].first(upon: queue) { _ in
                        note(.value)
                        return true
                    })
            case .retry:
                // The first start runs at once, on the caller, by design: only the retries count.
                let tries = Counter()
                return Stage(
                    Attempt.retry(
                        attempts: 2, upon: queue,
                        while: { _ in
                            note(.failure)
                            return true
                        }
                    ) {
                        guard tries.increment() > 0 else { return source }
                        note(.any)
                        return Attempt(failedWith: .failed(2))
                    })
            case .uponSuccess:
                return Stage(source.uponSuccess(queue) { _ in note(.value) })
            case .uponFailure:
                return Stage(source.uponFailure(queue) { _ in note(.failure) })
            }
        }
    }

    /// An operator's attempt, type-erased to what the tests need.
    struct Stage: Sendable {
        let cancel: @Sendable () -> Void
        let finished: Future<Void>

        init<Success, Failure>(_ attempt: Attempt<Success, Failure>) {
            cancel = { attempt.cancel() }
            let done = Deferred<Void>()
            attempt.upon(.immediate) { _ in done.fill() }
            finished = Future(done)
        }
    }

    /// Runs `decide` on a pending source after applying the operator, and waits until the
    /// operator's work is done.
    func run(_ op: Operator, deciding decide: (borrowing DeferredAttempt<Int, TestError>) -> Void) -> Runs {
        let marked = MarkedQueue()
        let runs = Runs()
        let writer = DeferredAttempt<Int, TestError>()
        let stage = op.apply(to: writer.attempt, on: marked, recording: runs)
        #expect(!runs.anyRan, "no closure runs when the operator is called")
        decide(writer)
        #expect(stage.finished.wait(for: .seconds(10)) != nil)
        marked.drain()
        return runs
    }

    @Test(arguments: Operator.allCases)
    func onASuccessNoFailureClosureRunsAndEveryOtherRunsOnItsExecutor(_ op: Operator) {
        let runs = run(op) { $0.succeed(with: 1) }
        #expect(!runs.ran(.failure))
        #expect(runs.ranOffQueue == 0)
        if op.valueOnly {
            #expect(runs.ran(.value), "the value's closure ran")
        }
    }

    @Test(arguments: Operator.allCases)
    func onAFailureNoValueClosureRunsAndEveryOtherRunsOnItsExecutor(_ op: Operator) {
        let runs = run(op) { $0.fail(with: .failed(1)) }
        #expect(!runs.ran(.value))
        #expect(runs.ranOffQueue == 0)
        if !op.valueOnly {
            #expect(runs.ran(.failure), "the failure's closure ran")
        }
        if op == .retry {
            #expect(runs.ran(.any), "the retry started, on its executor")
        }
    }

    @Test(arguments: Operator.allCases)
    func aCancellationRunsNoClosureOffItsExecutor(_ op: Operator) {
        let marked = MarkedQueue()
        let runs = Runs()
        let writer = DeferredAttempt<Int, TestError>()
        let stage = op.apply(to: writer.attempt, on: marked, recording: runs)
        stage.cancel()
        writer.succeed(with: 1)
        marked.drain()
        #expect(!runs.ran(.value), "a cancelled stage's step never starts")
        #expect(runs.ranOffQueue == 0)
    }

    @Test func aMapErrorIntoAPlainTypeTranslatesACancelledSourceOnItsExecutor() {
        let marked = MarkedQueue()
        let writer = DeferredAttempt<Int, TestError>()
        let onQueue = Counter()
        let mapped = writer.attempt.mapError(upon: marked.queue) { error -> Plain in
            if marked.isCurrent { onQueue.increment() }
            return Plain(code: error == .cancelled ? 0 : 1)
        }
        let stopped = Counter()
        writer.onCancel { stopped.increment() }
        mapped.cancel()
        #expect(stopped.value == 1, "the work above was told to stop")
        #expect(mapped.wait(for: .seconds(10)) == .failure(Plain(code: 0)))
        #expect(onQueue.value == 1, "the cancelled source's error went through the transform, on its queue")
        #expect(mapped.isCancelled, "and the result reads as the cancellation it is")
    }

    @Test func aMapErrorCancellingWithFailsAtOnceWithTheGivenError() {
        let writer = DeferredAttempt<Int, TestError>()
        let translated = Counter()
        let mapped = writer.attempt.mapError(upon: DispatchQueue(label: "never"), cancellingWith: Plain(code: -1)) {
            _ in
            translated.increment()
            return Plain(code: 1)
        }
        let after = mapped.map(upon: .immediate) { $0 + 1 }
        mapped.cancel()
        #expect(mapped.peek() == .failure(Plain(code: -1)))
        #expect(mapped.isCancelled)
        #expect(after.peek() == .failure(Plain(code: -1)), "a stage after it inherits the error")
        #expect(writer.attempt.isCancelled)
        #expect(translated.value == 0)
    }
}

extension AttemptClosurePlacementTests.Operator {
    /// Whether the operator's closures run only for a failure.
    var failureOnly: Bool {
        switch self {
        case .mapErrorIntoCancellable, .mapErrorIntoAnyError, .mapErrorIntoPlain, .mapErrorCancellingWith, .recover,
            .recoverThrowing, .fallback, .fallbackIntoCancellable, .fallbackIntoAnyError, .uponFailure:
            true
        default: false
        }
    }

    /// Whether the operator's closures run only for a value.
    var valueOnly: Bool {
        switch self {
        case .map, .mapThrowing, .andThen, .andThenThrowing, .filter, .reduce, .firstWhere, .uponSuccess: true
        default: false
        }
    }
}
