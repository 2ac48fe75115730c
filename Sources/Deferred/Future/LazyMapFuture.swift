public import Dispatch

/// A future whose value is its base future's value passed through a transform, computed
/// afresh on every read.
///
/// Made by `future.lazy.map { ... }`. Unlike ``FutureProtocol/map(upon:transform:)``,
/// which runs its transform once and stores the result, a lazy map stores nothing: each
/// handler, `peek` and `wait` applies the transform again: `peek` and `wait` on the calling
/// thread, `upon` on the handler's executor just before the handler. Futures derived from this
/// one (`map`, `and`, `allFilled`, ...) apply it where the base's value is delivered, usually
/// on the thread that fills the base. Use it for cheap projections such as picking a field.
///
/// ```swift
/// let size = Deferred<(width: Int, height: Int)>()
/// let width: LazyMapFuture<Deferred<(width: Int, height: Int)>, Int> = size.lazy.map { $0.width }
/// width.upon(.main) { print("width: \($0)") }
/// size.fill(with: (width: 640, height: 480))
/// ```
public struct LazyMapFuture<Base: FutureProtocol, Value: Sendable>: FutureProtocol {
    /// The future whose value this future transforms.
    public let base: Base

    @usableFromInline
    internal let transform: LazyTransform<Base.Value, Value>

    @inlinable
    internal init(base: Base, transform: LazyTransform<Base.Value, Value>) {
        self.base = base
        self.transform = transform
    }

    /// Calls `body` with the transformed value, on `executor`, once the base future is filled.
    ///
    /// The transform runs on `executor` too, just before `body`.
    ///
    /// - Parameters:
    ///   - executor: Where the transform and `body` run. See ``Executor``.
    ///   - body: Called exactly once with the transformed value, then released.
    @inlinable
    public func upon(_ executor: some Executor, execute body: @escaping @Sendable (Value) -> Void) {
        base.upon(executor) { [transform] value in body(transform(value)) }
    }

    /// Returns the transformed value if the base future is filled, or `nil` at once.
    @inlinable
    public func peek() -> Value? {
        base.peek().map { transform($0) }
    }

    /// Blocks until the base future is filled or `time` passes, then transforms its value.
    ///
    /// - Parameter time: The latest time to wait until; `.distantFuture` waits indefinitely.
    /// - Returns: The transformed value, or `nil` if `time` passed first.
    @available(
        *, noasync, message: "wait(until:) blocks the thread; use 'await future.value' or 'try await future.get()'"
    )
    @inlinable
    public func wait(until time: DispatchTime) -> Value? {
        base.wait(until: time).map { transform($0) }
    }
}

/// The lazy operations on a future, made by ``FutureProtocol/lazy``: a `map` here makes a
/// view that stores nothing and applies its transform on every read, like `lazy.map` on a
/// sequence.
///
/// ```swift
/// let user: Future<User> = service.currentUser()
/// let name = user.lazy.map { $0.name }  // a LazyMapFuture: no allocation, no stored value
/// name.upon(.main) { label.text = $0 }
/// ```
public struct LazyFutureView<Base: FutureProtocol>: Sendable {
    /// The future whose value the views made here transform.
    public let base: Base

    @inlinable
    internal init(base: Base) {
        self.base = base
    }

    /// Returns a view of the base future whose value is `transform` applied to the base's, on
    /// every read.
    ///
    /// Nothing is computed or stored up front, and no allocation is made; every handler,
    /// `peek` and `wait` runs `transform` again.
    ///
    /// - Parameter transform: A cheap, pure function of the value.
    /// - Returns: A future that delivers the transformed value.
    @inlinable
    public func map<NewValue: Sendable>(
        _ transform: @escaping @Sendable (Base.Value) -> NewValue
    ) -> LazyMapFuture<Base, NewValue> {
        LazyMapFuture(base: base, transform: .single(transform))
    }
}

extension FutureProtocol {
    /// The lazy operations on this future: `future.lazy.map { ... }` is a view that applies its
    /// transform on every read and stores nothing.
    ///
    /// Use ``FutureProtocol/map(upon:transform:)`` to run a transform once and keep its result.
    @inlinable
    public var lazy: LazyFutureView<Self> {
        LazyFutureView(base: self)
    }

    /// Returns a view of this future whose value is `transform` applied to this one's.
    @_documentation(visibility: internal)
    @available(*, deprecated, message: "write 'lazy.map { ... }'")
    @inlinable
    public func every<NewValue: Sendable>(
        per transform: @escaping @Sendable (Value) -> NewValue
    ) -> LazyMapFuture<Self, NewValue> {
        lazy.map(transform)
    }
}

extension LazyMapFuture {
    /// This view itself: its `map` already applies its steps lazily.
    @inlinable
    public var lazy: LazyMapFuture<Base, Value> {
        self
    }

    /// Returns a view of the same base future whose value is `transform` applied to this view's
    /// value, on every read.
    ///
    /// A lazy map over a lazy map makes one view with a chain of steps rather than a view of a
    /// view, so chains of any length are read, filled and released without deep recursion.
    ///
    /// - Parameter transform: A cheap, pure function of the value.
    /// - Returns: A future that delivers the transformed value.
    @inlinable
    public func map<NewValue: Sendable>(
        _ transform: @escaping @Sendable (Value) -> NewValue
    ) -> LazyMapFuture<Base, NewValue> {
        LazyMapFuture<Base, NewValue>(base: base, transform: self.transform.appending(transform))
    }
}

/// The transform of a ``LazyMapFuture``: one closure, or a chain of steps made by `lazy.map` over
/// `lazy.map`, applied in a loop.
///
/// Composing closures would make a chain of a million `lazy.map`s call a million levels deep on
/// every read, and release a million levels deep; a chain of ``LazyStep``s does neither.
@usableFromInline
internal enum LazyTransform<Input: Sendable, Output: Sendable>: Sendable {
    /// A single step, stored as is: a view made by one `lazy.map` allocates nothing.
    case single(@Sendable (Input) -> Output)
    /// The last of several steps.
    case chain(LazyStep)

    /// Applies the transform to `input`.
    @inlinable
    internal func callAsFunction(_ input: Input) -> Output {
        switch self {
        case .single(let transform):
            transform(input)
        case .chain(let last):
            last.apply(to: input) as! Output
        }
    }

    /// This transform followed by every step of `next`.
    @usableFromInline
    internal func appending<Next: Sendable>(_ next: LazyTransform<Output, Next>) -> LazyTransform<Input, Next> {
        switch next {
        case .single(let transform):
            return appending(transform)
        case .chain(let last):
            var chain = lastStep
            for step in last.steps {
                chain = LazyStep(after: chain, step.step)
            }
            return .chain(chain)
        }
    }

    /// The last step of this transform as a chain.
    @usableFromInline
    internal var lastStep: LazyStep {
        switch self {
        case .single(let transform): LazyStep(after: nil) { transform($0 as! Input) }
        case .chain(let last): last
        }
    }

    /// This transform followed by `next`.
    @inlinable
    internal func appending<Next: Sendable>(
        _ next: @escaping @Sendable (Output) -> Next
    ) -> LazyTransform<Input, Next> {
        .chain(LazyStep(after: lastStep) { next($0 as! Output) })
    }
}

/// One step of a chain of lazy transforms, with the step before it.
///
/// `@unchecked Sendable` is sound because `previous` is set in `init` and changed only by
/// ``detachDownstream(to:)``, which runs only when nothing else references this step.
@usableFromInline
internal final class LazyStep: ChainNode, @unchecked Sendable {
    @exclusivity(unchecked)
    private var previous: LazyStep?
    /// The function of this step alone.
    @usableFromInline
    internal let step: @Sendable (any Sendable) -> any Sendable

    @usableFromInline
    internal init(after previous: LazyStep?, _ step: @escaping @Sendable (any Sendable) -> any Sendable) {
        self.previous = previous
        self.step = step
    }

    deinit {
        releaseDownstream()
    }

    /// Every step up to and including this one, first to last.
    @usableFromInline
    internal var steps: [LazyStep] {
        var steps: [LazyStep] = []
        var step: LazyStep? = self
        while let current = step {
            steps.append(current)
            step = current.previous
        }
        return steps.reversed()
    }

    /// Applies every step up to and including this one, first to last, in a loop.
    @usableFromInline
    internal func apply(to input: any Sendable) -> any Sendable {
        var value = input
        for current in steps {
            value = current.step(value)
        }
        return value
    }

    @usableFromInline
    override internal func detachDownstream(to nodes: inout ReleaseStack) {
        if let previous = previous.take() {
            nodes.push(previous)
        }
    }
}

extension LazyMapFuture: FutureView {
    @usableFromInline
    internal func addLinkThroughView<Linked>(
        _ node: ChainNode,
        in queue: inout DrainQueue,
        _ step: @escaping @Sendable (ChainNode, Linked, inout DrainQueue) -> Void
    ) {
        base.addLink(node, in: &queue) { [transform] node, value, queue in
            step(node, transform(value) as! Linked, &queue)
        }
    }
}

/// A lazy map that can be erased to a ``Future`` without nesting: erasing a lazy map over an
/// erased lazy map makes one view over the first one's base, with the steps of both.
///
/// Without this, a chain that alternates `lazy.map` and `eraseToFuture()` would nest one box in
/// the next, and every read, link and release would recurse through all of them.
///
/// Like ``FutureView``, the protocol names no primary associated type, so that recognizing a
/// lazy view is a cached conformance check; the generic requirements below take the view's
/// value type as a parameter and check it.
@usableFromInline
internal protocol ErasableLazyView: FutureProtocol {
    /// This view as the backing of a ``Future``.
    ///
    /// - Precondition: `Erased` is `Value`.
    func erasedBacking<Erased>() -> FutureBacking<Erased>

    /// The backing of a view over this view's base with this view's steps, then `next`.
    ///
    /// - Precondition: `Input` is `Value`.
    func backingAppending<Input, Next: Sendable>(_ next: LazyTransform<Input, Next>) -> FutureBacking<Next>
}

extension LazyMapFuture: ErasableLazyView {
    @usableFromInline
    internal func erasedBacking<Erased>() -> FutureBacking<Erased> {
        if let future = base as? Future<Base.Value>, case .erased(let box) = future.backing,
            let inner = box.base as? any ErasableLazyView
        {
            return inner.backingAppending(transform) as! FutureBacking<Erased>
        }
        return FutureBacking<Value>.erased(AnyFutureBox(self)) as! FutureBacking<Erased>
    }

    @usableFromInline
    internal func backingAppending<Input, Next: Sendable>(_ next: LazyTransform<Input, Next>) -> FutureBacking<Next> {
        let next = next as! LazyTransform<Value, Next>
        return .erased(AnyFutureBox(LazyMapFuture<Base, Next>(base: base, transform: transform.appending(next))))
    }
}
