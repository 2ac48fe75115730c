/// What a derived attempt computes from its source's result, once: the step of a `map`,
/// `mapError`, `recover`, `andThen` or `fallback`.
///
/// A step is a value type that the node stores with its exact type, so the node's calls to it
/// are direct and specialized where the combinator is, and a stage costs one allocation. The
/// node decides whether the step runs; the step only says what it does with an input.
///
/// The requirements ask separately whether the step runs and what passes on, so that a node's
/// common path makes no `Result` or `Optional` of its own: unoptimized, a function looks up the
/// metadata of every such local on entry, whichever branch it takes.
@usableFromInline
internal protocol AttemptStep: Sendable {
    /// The source's value.
    associatedtype Input: Sendable
    /// The source's error.
    associatedtype InputFailure: Error
    /// The derived attempt's value.
    associatedtype Success: Sendable
    /// The derived attempt's error.
    associatedtype Failure: Error
    /// What the step makes: the value itself, or an attempt that will finish with it.
    associatedtype Output

    /// Whether the step runs for `input`; otherwise ``passedOn(_:)`` is the result.
    static func runs(for input: Result<Input, InputFailure>) -> Bool

    /// The result to pass on, without running the step, for an input it does not run for.
    static func passedOn(_ input: Result<Input, InputFailure>) -> Result<Success, Failure>

    /// The failure a cancelled source's `input` becomes here, given the derived attempt's own
    /// cancellation error.
    static func cancellation(of input: Result<Input, InputFailure>, ownError: Failure?) -> Failure?

    /// Runs the step on an input that ``passedOn(_:)`` did not pass on.
    func run(_ input: Result<Input, InputFailure>) -> Result<Output, Failure>
}

extension AttemptStep where InputFailure == Failure {
    /// A cancelled source's failure passes on as it is; its success becomes this attempt's
    /// cancellation error.
    @inlinable
    internal static func cancellation(of input: Result<Input, InputFailure>, ownError: Failure?) -> Failure? {
        input.failure ?? ownError
    }
}

/// A step that runs on a success and passes a failure on: `map` and `andThen`.
@usableFromInline
internal struct OnSuccessStep<Input: Sendable, Success: Sendable, Output, Failure: Error>: AttemptStep {
    @usableFromInline
    internal typealias InputFailure = Failure

    @usableFromInline
    internal let body: @Sendable (Input) throws(Failure) -> Output

    @inlinable
    internal init(_ body: @escaping @Sendable (Input) throws(Failure) -> Output) {
        self.body = body
    }

    @inlinable
    internal static func runs(for input: Result<Input, Failure>) -> Bool {
        if case .success = input { true } else { false }
    }

    @inlinable
    internal static func passedOn(_ input: Result<Input, Failure>) -> Result<Success, Failure> {
        .failure(input.failureUnchecked)
    }

    @inlinable
    internal func run(_ input: Result<Input, Failure>) -> Result<Output, Failure> {
        do throws(Failure) {
            return .success(try body(input.successValueUnchecked))
        } catch {
            return .failure(error)
        }
    }
}

/// A step that runs on a failure and passes a success on: `recover` and `fallback`.
@usableFromInline
internal struct OnFailureStep<Success: Sendable, Output, Failure: Error>: AttemptStep {
    @usableFromInline
    internal typealias Input = Success

    @usableFromInline
    internal typealias InputFailure = Failure

    @usableFromInline
    internal let body: @Sendable (Failure) throws(Failure) -> Output

    @inlinable
    internal init(_ body: @escaping @Sendable (Failure) throws(Failure) -> Output) {
        self.body = body
    }

    @inlinable
    internal static func runs(for input: Result<Success, Failure>) -> Bool {
        if case .failure = input { true } else { false }
    }

    @inlinable
    internal static func passedOn(_ input: Result<Success, Failure>) -> Result<Success, Failure> {
        input
    }

    @inlinable
    internal func run(_ input: Result<Success, Failure>) -> Result<Output, Failure> {
        do throws(Failure) {
            return .success(try body(input.failureUnchecked))
        } catch {
            return .failure(error)
        }
    }
}

/// The step of a `mapError`: makes a new error from a failure that is not a cancellation.
@usableFromInline
internal struct MapErrorStep<Success: Sendable, InputFailure: Error, Failure: Error>: AttemptStep {
    @usableFromInline
    internal typealias Input = Success

    @usableFromInline
    internal let transform: @Sendable (InputFailure) -> Failure

    @inlinable
    internal init(_ transform: @escaping @Sendable (InputFailure) -> Failure) {
        self.transform = transform
    }

    @inlinable
    internal static func runs(for input: Result<Success, InputFailure>) -> Bool {
        if case .failure = input { true } else { false }
    }

    @inlinable
    internal static func passedOn(_ input: Result<Success, InputFailure>) -> Result<Success, Failure> {
        .success(input.successValueUnchecked)
    }

    /// A cancellation becomes this attempt's own cancellation error: the source's error has
    /// another type.
    @inlinable
    internal static func cancellation(of input: Result<Success, InputFailure>, ownError: Failure?) -> Failure? {
        ownError
    }

    @inlinable
    internal func run(_ input: Result<Success, InputFailure>) -> Result<Success, Failure> {
        .failure(transform(input.failureUnchecked))
    }
}
