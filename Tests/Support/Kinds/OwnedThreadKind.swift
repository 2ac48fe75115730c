public import Deferred
public import DeferredExecutors
public import Testing

/// What the tests of an executor that owns its thread use of it.
public protocol OwnedThreadExecutor: SchedulingExecutor {
    /// The executor's name, which its thread has too.
    var name: String { get }
    /// Whether it was shut down.
    var isShutDown: Bool { get }
    /// Whether the caller runs on its thread.
    var isCurrent: Bool { get }
    /// Stops its thread once the work submitted has run.
    @discardableResult func shutdown() -> Future<Void>
}

extension ThreadExecutor: OwnedThreadExecutor {}
extension LoopExecutor: OwnedThreadExecutor {}

/// The executors that own a thread of their own, for the tests that hold for each.
public enum OwnedThreadKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    /// A ``ThreadExecutor``: a thread that runs a Foundation run loop.
    case thread
    /// A ``LoopExecutor``: a thread that runs only its own bodies and timers.
    case loop

    /// The case name, as the test log shows it.
    public var testDescription: String { rawValue }

    /// A fresh executor of this kind, named `name` if given.
    public func make(name: String? = nil) -> any OwnedThreadExecutor {
        switch self {
        case .thread: name.map { ThreadExecutor(name: $0) } ?? ThreadExecutor()
        case .loop: name.map { LoopExecutor(name: $0) } ?? LoopExecutor()
        }
    }
}
