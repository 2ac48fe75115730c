/// A node of the graph that the library's combinators build: a storage, or a join that fills
/// one.
///
/// Each handler that a combinator adds holds the node it continues. Released naively, an
/// unfilled chain of a million `map`s would release a million storages by recursion and
/// overflow the stack; ``ReleaseStack/releaseAll()`` walks the same graph with a loop instead.
///
/// This is a class rather than a protocol so that `isKnownUniquelyReferenced` can look at it.
/// It holds no state; subclasses document their own thread safety.
@usableFromInline
internal class ChainNode: @unchecked Sendable {
    @inlinable
    internal init() {}

    /// Moves the nodes downstream of this one into `nodes` and drops everything else this node
    /// would release, so that releasing it releases nothing recursively.
    ///
    /// Called only on a node that nobody else holds strongly any more. A weak reference (an
    /// attempt's pending time limit) may still revive the node while this runs, and the revived
    /// node is then used as if nothing had happened: an override takes only what it takes with
    /// one atomic step that the node's other operations respect (its handlers), never a field
    /// that those operations read without such a step.
    @usableFromInline
    internal func detachDownstream(to nodes: inout ReleaseStack) {}

    /// One of this node's deciders is gone: a link to it will never run, and something else
    /// still holds the node.
    ///
    /// A node that nothing else can decide any more finishes
    /// without a value (an attempt is *orphaned*), handing the nodes of its own links to `nodes`
    /// as lost; the default does nothing, which is right for a node that does not wait on
    /// anything (a waiter, a future's combinator).
    @usableFromInline
    internal func lostDecider(to nodes: inout ReleaseStack) {}

    /// Releases the nodes downstream of this one with a loop: what the `deinit` of a node
    /// that may hold the only reference to a long chain calls.
    @usableFromInline
    internal final func releaseDownstream() {
        var nodes = ReleaseStack()
        detachDownstream(to: &nodes)
        nodes.releaseAll()
    }

    /// `node`, a node that a handler or a drain queue handed back, as the type it was linked
    /// as: the one place the library narrows a node's type without checking it.
    ///
    /// The invariant that makes it sound: a ``Handler`` link passes its step exactly the node
    /// it was made with, a ``ParkedHandlers`` entry exactly the storage it parked, and a
    /// ``LimitTimer`` exactly the node it limits; each step, entry or expiry is made beside that
    /// node, by code that names the node's type, and the source of a `sourcedLink` is the
    /// attempt node that runs it. Debug builds check it.
    @inlinable
    @inline(__always)
    internal static func linked(_ node: ChainNode) -> Self {
        assert(node is Self, "a link step received a node of another type")
        return unsafeDowncast(node, to: Self.self)
    }
}

/// Nodes to release with a loop rather than recursion.
///
/// An owner that may hold the only reference to a long chain pushes what it holds here in its
/// `deinit` and calls ``releaseAll()``. A chain hands over one node at a time, so the top of the
/// stack lives inline: releasing a chain touches no array.
///
/// A node pushed as *lost* comes from a link that will never run (its storage was released
/// unfilled, or orphaned): if something else still holds it, it is told that it lost a decider
/// (``ChainNode/lostDecider(to:)``), in the same loop.
@usableFromInline
internal struct ReleaseStack {
    /// The node pushed last, if any.
    @usableFromInline
    internal var top: ChainNode? = nil

    /// Whether ``top`` was pushed as lost.
    @usableFromInline
    internal var topIsLost = false

    /// The nodes below ``top``, oldest first, each with whether it was pushed as lost.
    @usableFromInline
    internal var below: [(node: ChainNode, isLost: Bool)] = []

    @inlinable
    internal init() {}

    /// Adds `node` to the nodes to release.
    @usableFromInline
    internal mutating func push(_ node: ChainNode) {
        push(node, isLost: false)
    }

    /// Adds `node`, whose link will never run, to the nodes to release.
    @usableFromInline
    internal mutating func pushLost(_ node: ChainNode) {
        push(node, isLost: true)
    }

    @usableFromInline
    internal mutating func push(_ node: ChainNode, isLost: Bool) {
        if let previous = top {
            below.append((previous, topIsLost))
        }
        top = node
        topIsLost = isLost
    }

    /// Makes room for `count` more nodes, so that pushing a node's several downstream nodes
    /// grows the stack once.
    @usableFromInline
    internal mutating func reserve(_ count: Int) {
        below.reserveCapacity(below.count + count)
    }

    /// Releases every node, and whatever only they keep alive: a node nothing else references
    /// first hands its downstream nodes to the stack, so releasing it recurses no further; a
    /// lost node that something else still references is told so.
    @usableFromInline
    internal mutating func releaseAll() {
        while true {
            var node: ChainNode
            let isLost: Bool
            if let next = top {
                top = nil
                node = next
                isLost = topIsLost
            } else if let entry = below.popLast() {
                node = entry.node
                isLost = entry.isLost
            } else {
                return
            }
            if isKnownUniquelyReferenced(&node) {
                node.detachDownstream(to: &self)
            } else if isLost {
                node.lostDecider(to: &self)
            }
        }
    }
}
