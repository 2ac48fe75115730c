public import Deferred
import Synchronization

/// A switch that turns off callbacks that are no longer wanted.
///
/// Wrap an executor with ``validating(_:)`` and a body submitted through it runs only if the
/// token is still valid when the body's turn comes; once ``invalidate()`` is called, pending
/// and future bodies are skipped and released. This solves the reusable-cell problem: the
/// late reply of an old request must not land in a view that now shows something else.
///
/// ```swift
/// final class AvatarCell {
///     private var token = InvalidationToken()
///
///     func show(_ user: User) {
///         token.invalidate()           // drop the previous user's late reply
///         token = InvalidationToken()
///         images.avatar(for: user).upon(token.validating(.main)) { [weak self] in self?.image = $0 }
///     }
/// }
/// ```
public final class InvalidationToken: Sendable {
    private let valid = Atomic<Bool>(true)

    /// Creates a valid token.
    public init() {}

    /// Whether bodies submitted through this token still run.
    public var isValid: Bool {
        valid.load(ordering: .acquiring)
    }

    /// Makes the token invalid for good: bodies that have not started are skipped.
    ///
    /// A body that is already running finishes.
    public func invalidate() {
        valid.store(false, ordering: .releasing)
    }

    /// Returns an executor that runs bodies on `base` while this token is valid.
    ///
    /// - Parameter base: Where bodies run.
    /// - Returns: An executor that checks this token before each body.
    public func validating<Base: Executor>(_ base: Base) -> InvalidatingExecutor<Base> {
        InvalidatingExecutor(base: base, token: self)
    }
}

/// An executor that runs bodies on another executor only while an ``InvalidationToken`` is
/// valid.
///
/// Made by ``InvalidationToken/validating(_:)``. A body submitted after invalidation is
/// released at once; one submitted before is checked again when its turn comes on the base
/// executor, skipped if the token is invalid by then, and released either way.
public final class InvalidatingExecutor<Base: Executor>: Executor {
    /// The executor that runs the bodies.
    public let base: Base

    /// The token that decides whether they run.
    public let token: InvalidationToken

    fileprivate init(base: Base, token: InvalidationToken) {
        self.base = base
        self.token = token
    }

    /// Runs `body` on the base executor if the token is still valid by then.
    public func submit(_ body: @escaping @Sendable () -> Void) {
        guard token.isValid else {
            return
        }
        base.submit { [token] in
            if token.isValid {
                body()
            }
        }
    }
}

extension InvalidatingExecutor: SchedulingExecutor where Base: SchedulingExecutor {
    /// Runs `body` on the base executor after `delay` if the token is still valid by then.
    ///
    /// - Parameters:
    ///   - delay: How long to wait first.
    ///   - body: The work to run.
    public func submit(after delay: Duration, _ body: @escaping @Sendable () -> Void) {
        guard token.isValid else {
            return
        }
        base.submit(after: delay) { [token] in
            if token.isValid {
                body()
            }
        }
    }
}
