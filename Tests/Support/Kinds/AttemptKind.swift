public import Deferred
public import Dispatch
public import Testing

/// Every kind of derived attempt, as one stage of a chain that keeps `Attempt<Int, TestError>`.
///
/// The attempt guarantee suites (AttemptGuaranteeTests, AttemptStackSafetyTests,
/// AttemptDemandTests) run over every case; a new attempt combinator joins this list.
public enum AttemptKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case map, mapError, andThen, recover, fallback, retry, timeout, delay, allSucceeded, firstSucceeded
    case filter, reduce, find, traverse, fallbackIntoOtherFailure, delayedResult
    case shared

    /// The case name, as the test log shows it.
    public var testDescription: String { rawValue }

    /// Adds one stage of this kind after `attempt`.
    ///
    /// Where the stage's step runs for a success, it adds one; where it runs for a failure, it adds
    /// one to the failure's code.
    public func stage(after attempt: Attempt<Int, TestError>, delayingOn queue: DispatchQueue) -> Attempt<
        Int, TestError
    > {
        switch self {
        case .map:
            attempt.map(upon: .immediate) { $0 + 1 }
        case .mapError:
            attempt.mapError(upon: .immediate) { $0.next }
        case .andThen:
            attempt.andThen(upon: .immediate) { Attempt(succeededWith: $0 + 1) }
        case .recover:
            attempt.recover(upon: .immediate) { error throws(TestError) in throw error.next }
        case .fallback:
            attempt.fallback(upon: .immediate) { Attempt(failedWith: $0.next) }
        case .retry:
            // No retries: the stage follows the one attempt `start` gives it, and releases
            // `start` at once.
            Attempt.retry(attempts: 1, upon: StoppedClock()) { attempt }
        case .timeout:
            attempt.timeout(after: .seconds(3_600), upon: StoppedClock(), failingWith: .timedOut)
        case .delay:
            attempt.delay(by: .zero, upon: queue)
        case .allSucceeded:
            [attempt].allSucceeded().map(upon: .immediate) { $0[0] + 1 }
        case .firstSucceeded:
            [attempt].firstSucceeded()
        case .filter:
            attempt.filter(upon: .immediate, failingWith: .failed(-1)) { $0 >= 0 }
        case .reduce:
            [attempt].reduce(0, upon: .immediate) { $0 + $1 + 1 }
        case .find:
            [attempt].first(upon: .immediate) { $0 >= 0 }.map(upon: .immediate) { ($0 ?? -2) + 1 }
        case .traverse:
            [0].allSucceeded { _ in attempt }.map(upon: .immediate) { $0[0] + 1 }
        case .fallbackIntoOtherFailure:
            // Into another failure type and back, each a fallback that changes the type.
            attempt.fallback(upon: .immediate) { Attempt<Int, WrappedTestError>(failedWith: .wrapped($0.next)) }
                .fallback(upon: .immediate) { Attempt<Int, TestError>(failedWith: $0.unwrapped) }
        case .delayedResult:
            attempt.andThen(upon: .immediate) { Attempt(filledWith: .success($0), after: .zero, upon: queue) }
        case .shared:
            // The only caller of a run shared by key, in a table of its own that is dropped at
            // once: a run in flight outlives its table.
            SharedAttempts<Int, Int, TestError>().attempt(for: 0) { _ in attempt }
        }
    }

    /// Whether this kind is a recipe: made only of nodes that other kinds prove at every size.
    ///
    /// A fallback into another failure type is one: a step that keeps the result (the node of
    /// `map`) and an `andThen`, twice per level.
    public var isRecipe: Bool {
        switch self {
        case .filter, .reduce, .find, .traverse, .delayedResult, .fallbackIntoOtherFailure: true
        default: false
        }
    }

    /// The sizes of a deep chain of this kind: the run's, or the quick sizes for a recipe (see
    /// ``FutureKind/deepChainSize``).
    public var deepChainSize: TestSize {
        isRecipe ? TestSize(.quick) : .current
    }

    /// The tail's result once the root succeeded with 0.
    public func succeeded(depth: Int) -> Result<Int, TestError> {
        switch self {
        case .map, .andThen, .allSucceeded, .reduce, .find, .traverse: .success(depth)
        default: .success(0)
        }
    }

    /// The tail's result once the root failed with `.failed(0)`.
    public func failed(depth: Int) -> Result<Int, TestError> {
        switch self {
        case .mapError, .recover, .fallback, .fallbackIntoOtherFailure: .failure(.failed(depth))
        default: .failure(.failed(0))
        }
    }
}

extension TestError {
    /// This failure with its code one higher.
    public var next: TestError {
        if case .failed(let code) = self { .failed(code + 1) } else { self }
    }
}
