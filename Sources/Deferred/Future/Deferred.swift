public import Dispatch

/// A value that is not known yet and becomes known exactly once: both its promise and its
/// future.
///
/// The code that produces the value keeps the `Deferred` private and fills it; everyone else
/// gets a read-only ``Future``:
///
/// ```swift
/// final class ProfileService: Sendable {
///     func loadName(for id: Int) -> Future<String> {
///         let name = Deferred<String>()
///         DispatchQueue.global().async {
///             name.fill(with: "user \(id)")  // e.g. after a network reply
///         }
///         return Future(name)
///     }
/// }
///
/// ProfileService().loadName(for: 7).upon(.main) { name in
///     print("Hello, \(name)")
/// }
/// ```
///
/// `Deferred` is a small handle: copies share one value. Filling, reading and adding handlers
/// are lock-free and safe from any thread. An unfilled `Deferred` costs one allocation that
/// also holds its first handler; ``init(filledWith:)`` costs none.
public struct Deferred<Value: Sendable>: FutureProtocol, PromiseProtocol {
    @usableFromInline
    internal let source: FutureSource<Value>

    /// Creates an unfilled deferred.
    ///
    /// - Parameters:
    ///   - file: Where the deferred is made, for ``PendingFutures``; leave the default.
    ///   - line: The line where the deferred is made; leave the default.
    @inlinable
    public init(file: StaticString = #fileID, line: UInt = #line) {
        let storage = Storage<Value>()
        source = .storage(storage)
        if PendingFutures.isRecording {
            PendingFutures.record(storage, typeName: "Deferred<\(Value.self)>", file: file, line: line)
        }
    }

    /// Creates an unfilled deferred, for generic code over ``PromiseProtocol``.
    ///
    /// It is ``init(file:line:)`` without a place.
    @_disfavoredOverload
    @inlinable
    public init() {
        self.init(file: "(unknown)", line: 0)
    }

    /// Creates a deferred that is already filled with `value`.
    ///
    /// - Parameter value: The value every reader sees; any later `fill` returns `false`.
    @inlinable
    public init(filledWith value: Value) {
        source = .filled(value)
    }

    /// Calls `body` with the value, on `executor`, once this deferred is filled.
    ///
    /// If the value is already there, `body` is submitted to `executor` at once (on
    /// ``ImmediateExecutor`` it runs before `upon` returns). Handlers added from one thread
    /// before the fill start in the order they were added when `executor` is serial.
    ///
    /// - Parameters:
    ///   - executor: Where `body` runs. See ``Executor``.
    ///   - body: Called exactly once with the value, then released.
    @inlinable
    public func upon(_ executor: some Executor, execute body: @escaping @Sendable (Value) -> Void) {
        Future(self).upon(executor, execute: body)
    }

    /// Returns the value if this deferred is filled, or `nil` at once if it is not.
    @inlinable
    public func peek() -> Value? {
        Future(self).peek()
    }

    /// Blocks the calling thread until this deferred is filled or `time` passes.
    ///
    /// Returns at once, without allocating, when the value is there; returns `nil` at once
    /// when `time` has passed. Never wait on the executor whose work fills this deferred.
    ///
    /// - Parameter time: The latest time to wait until; `.distantFuture` waits indefinitely.
    /// - Returns: The value, or `nil` if `time` passed first.
    @available(
        *, noasync, message: "wait(until:) blocks the thread; use 'await future.value' or 'try await future.get()'"
    )
    @inlinable
    public func wait(until time: DispatchTime) -> Value? {
        Future(self).wait(until: time)
    }

    /// Whether this deferred has been filled.
    @inlinable
    public var isFilled: Bool {
        Future(self).isFilled
    }

    /// Fills this deferred with `value` unless it is filled already, then runs every pending
    /// handler.
    ///
    /// Of any number of racing calls exactly one returns `true`, and every reader sees its
    /// value. When this returns, with either result, ``peek()`` returns the winning value.
    ///
    /// - Parameter value: The value to deliver to every reader.
    /// - Returns: `true` if this call filled the deferred, `false` if it was already filled.
    @inlinable
    @discardableResult
    public func fill(with value: Value) -> Bool {
        source.fill(value)
    }
}
