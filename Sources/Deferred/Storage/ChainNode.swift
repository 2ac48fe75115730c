/// A node of the graph that the library's combinators build: a storage, or a join that fills
/// one.
///
/// Each handler that a combinator adds holds the node it continues. Released naively, an
/// unfilled chain of a million `map`s would release a million storages by recursion and
/// overflow the stack; ``releaseIteratively(_:)`` walks the same graph with a loop instead.
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
    /// Called only on a node that nobody else references any more.
    @usableFromInline
    internal func detachDownstream(to nodes: inout [ChainNode]) {}

    /// Releases `nodes`, and whatever only they keep alive, with a loop rather than recursion.
    @usableFromInline
    internal static func releaseIteratively(_ nodes: inout [ChainNode]) {
        while var node = nodes.popLast() {
            if isKnownUniquelyReferenced(&node) {
                node.detachDownstream(to: &nodes)
            }
        }
    }
}
