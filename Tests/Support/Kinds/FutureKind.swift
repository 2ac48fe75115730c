public import Deferred
public import Testing

/// Every way the library derives a future from another, as one stage of a chain of
/// `Future<Int>`.
///
/// The guarantee suites run over every case, so a combinator missing here stands out. A new
/// combinator joins this list in the change that adds it.
///
/// The attempt combinators have their own list, ``AttemptKind``, because an attempt chain is
/// also cancelled; ``attempt`` is an attempt used as a stage of a future chain.
///
/// Each stage's closures that run once capture `probe`, so a test sees whether they ran
/// exactly once and were released; lazy views (`lazy.map`) keep their closure by design and
/// capture nothing.
public enum FutureKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case map, andThen, lazyMap, ignored, and, allFilled, firstFilled, delay, timeout
    case async, closure, userWritten, attempt
    case filter, reduce, find, traverse, producer, delayedValue
    case shared

    /// The case name, as the test log shows it.
    public var testDescription: String { rawValue }

    /// Adds one stage of this kind after `future`.
    ///
    /// - Parameters:
    ///   - future: The stage before.
    ///   - executor: Where the stage's step runs, and what measures its delay or limit.
    ///   - probe: What the stage's run-once closures capture and count.
    ///   - limit: The time limit of a `timeout` stage.
    /// - Returns: The new stage, a future whose value is ``tail(depth:)`` of the chain so far.
    public func stage(
        after future: Future<Int>, on executor: ExecutorUnderTest, probe: StageProbe, limit: Duration = .seconds(3_600)
    ) -> Future<Int> {
        let on = executor.executor
        switch self {
        case .map:
            return future.map(upon: on) { [probe] in probe.ran($0 + 1) }
        case .andThen:
            return future.andThen(upon: on) { [probe] in Future(filledWith: probe.ran($0 + 1)) }
        case .lazyMap:
            return future.lazy.map { $0 + 1 }.eraseToFuture()
        case .ignored:
            return future.ignored().map(upon: on) { [probe] in probe.ran(1) }
        case .and:
            return future.and(Future(filledWith: 1)).lazy.map { $0 + $1 }.eraseToFuture()
        case .allFilled:
            return [future, Future(filledWith: 1)].allFilled().lazy.map { $0[0] + $0[1] }.eraseToFuture()
        case .firstFilled:
            return [future, .never].firstFilled()
        case .delay:
            return future.delay(by: .zero, upon: executor.scheduling)
        case .timeout:
            return future.timeout(after: limit, upon: executor.scheduling, substituting: -1)
        case .async:
            return future.andThen(upon: .immediate) { value in
                Future(upon: on) { [probe] in probe.ran(value + 1) }
            }
        case .closure:
            return future.andThen(upon: .immediate) { value in
                Future { [probe] in probe.ran(value + 1) }
            }
        case .userWritten:
            return future.andThen(upon: on) { [probe] value in
                CountingFuture(base: Deferred(filledWith: probe.ran(value + 1)))
            }
        case .attempt:
            return Attempt<Int, Never>(future).map(upon: on) { [probe] in probe.ran($0 + 1) }
                .lazy.map { $0.get() }.eraseToFuture()
        case .filter:
            return future.filter(upon: on, failingWith: TestError.failed(-1)) { [probe] in probe.ran($0) >= 0 }
                .lazy.map { ((try? $0.get()) ?? -2) + 1 }.eraseToFuture()
        case .reduce:
            return [future, Future(filledWith: 1)].reduce(0, upon: on) { $0 + $1 }
        case .find:
            return [future].first(upon: on) { [probe] in probe.ran($0) >= 0 }.lazy.map { ($0 ?? -2) + 1 }
                .eraseToFuture()
        case .traverse:
            return [1].allFilled { _ in future }.lazy.map { $0[0] + 1 }.eraseToFuture()
        case .producer:
            // The producer fills from a callback; chained by `andThen`, as a stage built on
            // `upon` and `fill` would be neither stack-safe nor released in a loop.
            return future.andThen(upon: on) { value in
                Future { deferred in deferred.fill(with: probe.ran(value + 1)) }
            }
        case .delayedValue:
            return future.andThen(upon: .immediate) { Future(filledWith: $0, after: .zero, upon: executor.scheduling) }
        case .shared:
            // The only caller of a run shared by key, in a table of its own that is dropped at
            // once: a run in flight outlives its table.
            return SharedFutures<Int, Int>().future(for: 0) { _ in future }
        }
    }

    /// Whether this kind is a recipe: made only of nodes that other kinds prove at every size.
    public var isRecipe: Bool {
        switch self {
        case .filter, .reduce, .find, .traverse, .producer, .delayedValue: true
        default: false
        }
    }

    /// The sizes of a deep chain of this kind: the run's, or the quick sizes for a recipe, whose
    /// nodes run a million deep as their own kinds; a recipe's stage links several of them, so
    /// what it could add is recursion between them, which the quick depth on its small stack
    /// catches as well (see ``TestSize/deepStackBytes``).
    public var deepChainSize: TestSize {
        isRecipe ? TestSize(.quick) : .current
    }

    /// The tail's value once the root of a chain of `depth` stages is filled with 0.
    public func tail(depth: Int) -> Int {
        switch self {
        case .map, .andThen, .lazyMap, .and, .allFilled, .async, .closure, .userWritten, .attempt: depth
        case .filter, .reduce, .find, .traverse, .producer: depth
        case .ignored: depth > 0 ? 1 : 0
        case .firstFilled, .delay, .timeout, .delayedValue, .shared: 0
        }
    }

    /// How many run-once closures a chain of `depth` stages runs once its root is filled.
    public func steps(depth: Int) -> Int {
        switch self {
        case .map, .andThen, .ignored, .async, .closure, .userWritten, .attempt: depth
        case .filter, .find, .producer: depth
        case .lazyMap, .and, .allFilled, .firstFilled, .delay, .timeout, .reduce, .traverse, .delayedValue, .shared: 0
        }
    }
}

/// What the stages of one chain capture: counts the closures that ran and holds a tracked
/// object, so the object stays alive exactly as long as some stage's closure does.
public final class StageProbe: Sendable {
    /// Counts the closures that ran.
    public let runs = Counter()

    /// Alive while any closure that captured this probe is.
    private let tracked: LifetimeTracked

    /// Creates a probe counted by `live`.
    public init(_ live: LiveCount) {
        tracked = LifetimeTracked(live)
    }

    /// Counts a run, and returns `value`.
    public func ran(_ value: Int) -> Int {
        runs.increment()
        return value
    }
}
