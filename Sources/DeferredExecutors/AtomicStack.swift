import Synchronization

/// A lock-free stack that any thread may push onto and any thread may empty in one step, and
/// that can be closed to further pushes.
///
/// The executors of this module keep their pending work in one. Pushing and emptying are
/// single atomic operations on one word, so work submitted from any thread is never lost or
/// seen twice, and closing draws a sharp line: a push either lands before the close, and is
/// taken by whoever empties the stack next, or fails.
///
/// The word holds the address of the newest node, with bit 0 set once the stack is closed.
/// Each node is owned by exactly one party at a time: its pusher until the compare-and-swap
/// that publishes it (releasing), then the stack, then whoever takes it with an exchange
/// (acquiring). Elements are `Sendable`, so handing them between threads this way is safe.
final class AtomicStack<Element: Sendable>: Sendable {
    private let head = Atomic<UInt>(0)

    private static var closedBit: UInt { 1 }

    private final class Node {
        let element: Element
        var next: UInt = 0

        init(_ element: Element) {
            self.element = element
        }
    }

    /// The outcome of a push.
    enum Push: Equatable {
        /// The element is on the stack; `wasEmpty` tells whether it was the only one.
        case accepted(wasEmpty: Bool)
        /// The stack is closed; the element was dropped.
        case closed
    }

    deinit {
        _ = takeNodes(head.exchange(0, ordering: .acquiring))
    }

    /// Whether the stack is closed to pushes.
    var isClosed: Bool {
        head.load(ordering: .acquiring) & Self.closedBit != 0
    }

    /// Whether the stack holds nothing.
    var isEmpty: Bool {
        head.load(ordering: .acquiring) & ~Self.closedBit == 0
    }

    /// Pushes `element` unless the stack is closed.
    @discardableResult
    func push(_ element: Element) -> Push {
        let node = Node(element)
        let bits = UInt(bitPattern: Unmanaged.passRetained(node).toOpaque())
        var observed = head.load(ordering: .relaxed)
        while observed & Self.closedBit == 0 {
            node.next = observed
            let (exchanged, original) = head.compareExchange(
                expected: observed,
                desired: bits,
                successOrdering: .releasing,
                failureOrdering: .relaxed
            )
            if exchanged {
                return .accepted(wasEmpty: observed == 0)
            }
            observed = original
        }
        Unmanaged<Node>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!).release()
        return .closed
    }

    /// Removes every element and returns them oldest first.
    func takeAll() -> [Element] {
        var observed = head.load(ordering: .relaxed)
        while observed & ~Self.closedBit != 0 {
            let (exchanged, original) = head.compareExchange(
                expected: observed,
                desired: observed & Self.closedBit,
                successOrdering: .acquiring,
                failureOrdering: .relaxed
            )
            if exchanged {
                return takeNodes(observed & ~Self.closedBit)
            }
            observed = original
        }
        return []
    }

    /// Closes the stack to pushes; returns whether this call closed it.
    @discardableResult
    func close() -> Bool {
        head.bitwiseOr(Self.closedBit, ordering: .acquiringAndReleasing).oldValue & Self.closedBit == 0
    }

    /// Releases the nodes from `bits` on and returns their elements, oldest first.
    private func takeNodes(_ bits: UInt) -> [Element] {
        var elements: [Element] = []
        var bits = bits & ~Self.closedBit
        while bits != 0 {
            let node = Unmanaged<Node>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!).takeRetainedValue()
            elements.append(node.element)
            bits = node.next
        }
        return elements.reversed()
    }
}

extension Array {
    /// Removes the elements one by one, first to last, and passes each to `body`, so that each
    /// is released as soon as `body` returns rather than when the whole array goes away.
    mutating func removeEach(_ body: (Element) -> Void) {
        reverse()
        while let element = popLast() {
            body(element)
        }
    }
}
