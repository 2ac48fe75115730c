/// An executor that runs bodies on the main actor.
///
/// Use it where any executor is accepted, such as `map(upon: .mainActor)`. For a handler that
/// uses main-actor state, ``FutureProtocol/uponMainActor(execute:)`` takes a closure isolated
/// to the main actor:
///
/// ```swift
/// @MainActor final class ProfileScreen {
///     var title = ""
///     func load(_ name: Future<String>) {
///         name.uponMainActor { self.title = $0 }
///     }
/// }
/// ```
///
/// Each body runs in a task on the main actor, in the order submitted.
public final class MainActorExecutor: Executor {
    /// The instance behind ``Executor/mainActor``.
    public static let shared = MainActorExecutor()

    private init() {}

    /// Runs `body` on the main actor.
    public func submit(_ body: @escaping @Sendable () -> Void) {
        Task { @MainActor in
            body()
        }
    }
}

extension Executor where Self == MainActorExecutor {
    /// An executor that runs bodies on the main actor.
    public static var mainActor: MainActorExecutor { .shared }
}

extension FutureProtocol {
    /// Calls `body`, isolated to the main actor, with the value once the future is filled.
    ///
    /// Because `body` is main-actor isolated, it may use main-actor state directly:
    ///
    /// ```swift
    /// name.uponMainActor { screen.title = $0 }
    /// ```
    ///
    /// This is the default implementation of the requirement: it delivers every value. An
    /// ``Attempt`` implements it itself, to withdraw the delivery when it is cancelled.
    ///
    /// - Parameter body: Called exactly once with the value, on the main actor.
    public func uponMainActor(execute body: @escaping @MainActor @Sendable (Value) -> Void) {
        upon(MainActorExecutor.shared) { value in
            MainActor.assumeIsolated { body(value) }
        }
    }
}
