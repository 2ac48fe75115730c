public import Synchronization

/// A class whose instances link into a lock-free stack through a field of their own: the
/// nodes of a ``ClosableStack`` and a storage's handler chunks.
@usableFromInline
package protocol StackNode: AnyObject {
    /// The address bits of the next node, which this node retains, or zero.
    ///
    /// It belongs to whoever owns the node: its pusher until the push publishes it, then
    /// whoever takes it off the stack.
    var next: UInt { get set }
}

/// A chain of retained nodes, by the address bits of its first: what a stack hands over when
/// it is emptied (newest first).
@frozen
@usableFromInline
package struct NodeChain<Node: StackNode> {
    /// The address bits of the first node, or zero if the chain is empty.
    @usableFromInline
    package var head: UInt = 0

    /// An empty chain.
    @inlinable
    package init() {}

    /// The chain that starts at `head`.
    @inlinable
    package init(head: UInt) {
        self.init()
        self.head = head
    }

    /// Whether the chain has no node.
    @inlinable
    package var isEmpty: Bool { head == 0 }

    /// This chain in the opposite order, relinked in place: a stack's nodes oldest first.
    @inlinable
    package func reversed() -> NodeChain {
        var reversed: UInt = 0
        var bits = head
        while bits != 0 {
            let node = RetainedBits.borrow(bits, as: Node.self)
            let next = node.next
            node.next = reversed
            reversed = bits
            bits = next
        }
        return NodeChain(head: reversed)
    }

    /// Takes the first node off the chain, with its retain.
    @inlinable
    package mutating func popFirst() -> Node? {
        guard head != 0 else {
            return nil
        }
        let node = RetainedBits.take(head, as: Node.self)
        head = node.next
        return node
    }
}

/// A lock-free stack that any thread may push onto and any thread may empty in one step, and
/// that can be closed to further pushes: the pending work of a `ThreadExecutor` and the tasks
/// awaiting a storage's value.
///
/// The word holds the address bits of the newest node, with bit 0 set once the stack is
/// closed. Each node is owned by one party at a time: its pusher until the compare-and-swap
/// that publishes it (releasing), then the stack, then whoever takes it with an acquiring
/// operation. So an element pushed from any thread is taken exactly once, and closing draws a
/// sharp line: a push lands before the close, and is taken by whoever empties the stack next,
/// or fails.
///
/// `@unchecked Sendable` is sound because the stack only moves nodes between threads, each
/// owned by one party at a time as above, and its users push nodes whose payload is `Sendable`
/// (a `@Sendable` body, a `Sendable` waiter); a node's `next` is touched only by its owner.
@usableFromInline
package struct ClosableStack<Node: StackNode>: ~Copyable, @unchecked Sendable {
    @usableFromInline
    internal let word: Atomic<UInt>

    @inlinable
    internal static var closedBit: UInt { 1 }

    /// An empty, open stack.
    @inlinable
    package init() {
        word = Atomic(0)
    }

    deinit {
        var nodes = NodeChain<Node>(head: word.load(ordering: .acquiring) & ~Self.closedBit)
        while nodes.popFirst() != nil {}
    }

    /// Whether the stack is closed to pushes.
    @inlinable
    package var isClosed: Bool {
        word.load(ordering: .acquiring) & Self.closedBit != 0
    }

    /// The outcome of a push.
    @frozen
    @usableFromInline
    package enum Push: Equatable {
        /// The node is on the stack; `wasEmpty` tells whether it is the only one.
        case accepted(wasEmpty: Bool)
        /// The stack is closed; the caller keeps the node.
        case closed
    }

    /// Pushes `node` unless the stack is closed.
    @inlinable
    package func push(_ node: Node) -> Push {
        let bits = RetainedBits.retain(node)
        let (observed, pushed) = word.update { observed in
            guard observed & Self.closedBit == 0 else {
                return nil
            }
            node.next = observed
            return bits
        }
        guard pushed else {
            RetainedBits.release(bits, as: Node.self)
            return .closed
        }
        return .accepted(wasEmpty: observed == 0)
    }

    /// Pushes back `nodes`, a chain taken from this stack whose last node is `last`, on top of
    /// whatever was pushed since, unless the stack was closed meanwhile; then the caller keeps
    /// them, and can read what was published before the close.
    @inlinable
    package func pushBack(_ nodes: NodeChain<Node>, last: Node) -> Bool {
        word.update { observed in
            guard observed & Self.closedBit == 0 else {
                return nil
            }
            last.next = observed
            return nodes.head
        }.updated
    }

    /// Takes every node, newest first, leaving the stack open or closed as it was.
    @inlinable
    package func takeAll() -> NodeChain<Node> {
        let (observed, taken) = word.update { observed in
            observed & ~Self.closedBit == 0 ? nil : observed & Self.closedBit
        }
        return NodeChain(head: taken ? observed & ~Self.closedBit : 0)
    }

    /// Closes the stack to pushes; returns whether this call closed it.
    @inlinable
    @discardableResult
    package func close() -> Bool {
        word.bitwiseOr(Self.closedBit, ordering: .acquiringAndReleasing).oldValue & Self.closedBit == 0
    }

    /// Closes the stack and takes every node, newest first, in one step: what was written
    /// before this call is visible to whoever then finds the stack closed.
    @inlinable
    package func closeAndTakeAll() -> NodeChain<Node> {
        NodeChain(head: word.exchange(Self.closedBit, ordering: .acquiringAndReleasing) & ~Self.closedBit)
    }
}
