/// An executor that runs each body at once, in the context of whoever submits it.
///
/// A handler added with `upon(.immediate)` runs on the thread that fills the future, or, if
/// the future is already filled, inside the call to `upon` itself. Use it for short,
/// thread-safe work such as forwarding a value or updating an atomic counter; use a queue for
/// anything that may block or that touches state confined to one thread.
///
/// The library's own combinators run their immediate steps in a loop rather than by nesting
/// calls, so chains of any length (a million `map(upon: .immediate)` stages, say) fill
/// without growing the stack. A handler that itself fills another future does nest one call
/// deeper for each such hop; prefer `map` and `andThen` for long chains.
///
/// ```swift
/// let doubled = numbers.map(upon: .immediate) { $0 * 2 }
/// doubled.upon(.immediate) { print($0) }
/// ```
public final class ImmediateExecutor: Executor {
    /// The instance behind ``Executor/immediate``.
    @usableFromInline
    internal static let shared = ImmediateExecutor()

    /// Creates an immediate executor.
    ///
    /// All instances behave the same; ``Executor/immediate`` names a shared one.
    @inlinable
    public init() {}

    /// Runs `body` now, before returning.
    @inlinable
    public func submit(_ body: @escaping @Sendable () -> Void) {
        body()
    }
}
