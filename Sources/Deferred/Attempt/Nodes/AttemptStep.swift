/// What a derived attempt computes from its source's result, once: the step of a `map`,
/// `mapError`, `recover`, `andThen` or `fallback`.
///
/// A step is a caseless type naming what its node does: the node stores the user's closure
/// (``Body``) and calls the step's static functions, which are direct and specialized where the
/// combinator is, so a stage costs one allocation. The node decides whether the step runs; the
/// step only says what it does with an input.
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
    /// What the user's closure takes: the source's value, or its error.
    associatedtype Argument
    /// What the user's closure returns.
    associatedtype Made
    /// What the user's closure throws.
    associatedtype Thrown: Error

    /// Whether the step runs for `input`; otherwise ``passedOn(_:)`` is the result.
    static func runs(for input: Result<Input, InputFailure>) -> Bool

    /// The result to pass on, without running the step, for an input it does not run for.
    static func passedOn(_ input: Result<Input, InputFailure>) -> Result<Success, Failure>

    /// The failure a cancelled source's `input` becomes here, given the derived attempt's own
    /// cancellation error.
    static func cancellation(of input: Result<Input, InputFailure>, ownError: Failure?) -> Failure?

    /// Runs `body` on an input that ``passedOn(_:)`` did not pass on.
    static func run(_ body: Body, on input: Result<Input, InputFailure>) -> Result<Output, Failure>
}

extension AttemptStep {
    /// The user's closure, as a node stores it.
    ///
    /// A function type has the same layout whatever its parameters, so a node's unspecialized
    /// deinit destroys a `Body?` without looking up any metadata (it would for a `Step?`).
    @usableFromInline
    internal typealias Body = @Sendable (Argument) throws(Thrown) -> Made
}

extension AttemptStep where InputFailure == Failure {
    /// A cancelled source's result, whatever it was, becomes this attempt's cancellation error;
    /// without one, a cancelled source's failure passes on as it is.
    @inlinable
    internal static func cancellation(of input: Result<Input, InputFailure>, ownError: Failure?) -> Failure? {
        ownError ?? input.failure
    }
}

/// The step of `map` and `andThen`: runs on a success and passes a failure on.
@usableFromInline
internal enum OnSuccessStep<Input: Sendable, Success: Sendable, Output, Failure: Error>: AttemptStep {
    @usableFromInline
    internal typealias InputFailure = Failure

    @usableFromInline
    internal typealias Argument = Input

    @usableFromInline
    internal typealias Made = Output

    @usableFromInline
    internal typealias Thrown = Failure

    @inlinable
    internal static func runs(for input: Result<Input, Failure>) -> Bool {
        if case .success = input { true } else { false }
    }

    @inlinable
    internal static func passedOn(_ input: Result<Input, Failure>) -> Result<Success, Failure> {
        .failure(input.failureUnchecked)
    }

    @inlinable
    internal static func run(_ body: Body, on input: Result<Input, Failure>) -> Result<Output, Failure> {
        do throws(Failure) {
            return .success(try body(input.successValueUnchecked))
        } catch {
            return .failure(error)
        }
    }
}

/// The step of `recover` and `fallback`: runs on a failure and passes a success on.
@usableFromInline
internal enum OnFailureStep<Success: Sendable, Output, Failure: Error>: AttemptStep {
    @usableFromInline
    internal typealias Input = Success

    @usableFromInline
    internal typealias InputFailure = Failure

    @usableFromInline
    internal typealias Argument = Failure

    @usableFromInline
    internal typealias Made = Output

    @usableFromInline
    internal typealias Thrown = Failure

    @inlinable
    internal static func runs(for input: Result<Success, Failure>) -> Bool {
        if case .failure = input { true } else { false }
    }

    @inlinable
    internal static func passedOn(_ input: Result<Success, Failure>) -> Result<Success, Failure> {
        input
    }

    @inlinable
    internal static func run(_ body: Body, on input: Result<Success, Failure>) -> Result<Output, Failure> {
        do throws(Failure) {
            return .success(try body(input.failureUnchecked))
        } catch {
            return .failure(error)
        }
    }
}

/// The step of `mapError`: makes a new error from a failure that is not a cancellation.
@usableFromInline
internal enum MapErrorStep<Success: Sendable, InputFailure: Error, Failure: Error>: AttemptStep {
    @usableFromInline
    internal typealias Input = Success

    @usableFromInline
    internal typealias Output = Success

    @usableFromInline
    internal typealias Argument = InputFailure

    @usableFromInline
    internal typealias Made = Failure

    /// Typed as throwing only to share ``AttemptStep/Body``'s shape (the transform never
    /// throws): Swift 6.3 crashes emitting a `throws(Never)` witness for it.
    @usableFromInline
    internal typealias Thrown = Failure

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
    internal static func run(_ body: Body, on input: Result<Success, InputFailure>) -> Result<Success, Failure> {
        do throws(Failure) {
            return .failure(try body(input.failureUnchecked))
        } catch {
            return .failure(error)
        }
    }
}
