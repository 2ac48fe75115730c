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
