/// A binary heap: the element that comes first by `precedes` is at the top, and adding or
/// taking one is O(log n).
///
/// Attempts keep the deepest stage with side demand in one (a max-heap of depths), and the
/// `DeferredExecutors` module's virtual clock keeps its pending bodies in one (by due time,
/// then submission).
@usableFromInline
package struct BinaryHeap<Element> {
    /// The elements, in heap order: each precedes or ties with its children.
    @usableFromInline
    internal var elements: [Element] = []

    /// Whether `lhs` comes out before `rhs`.
    @usableFromInline
    internal let precedes: @Sendable (Element, Element) -> Bool

    /// An empty heap ordered by `precedes`.
    @inlinable
    package init(by precedes: @escaping @Sendable (Element, Element) -> Bool) {
        self.precedes = precedes
    }

    /// The element that comes out next, if any.
    @inlinable
    package var first: Element? { elements.first }

    /// Whether the heap holds nothing.
    @inlinable
    package var isEmpty: Bool { elements.isEmpty }

    /// Adds `element`.
    @inlinable
    package mutating func insert(_ element: Element) {
        elements.append(element)
        var child = elements.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard precedes(elements[child], elements[parent]) else {
                break
            }
            elements.swapAt(child, parent)
            child = parent
        }
    }

    /// Takes out the element that comes first.
    @inlinable
    @discardableResult
    package mutating func popFirst() -> Element? {
        guard !elements.isEmpty else {
            return nil
        }
        elements.swapAt(0, elements.count - 1)
        let first = elements.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var next = parent
            if left < elements.count && precedes(elements[left], elements[next]) {
                next = left
            }
            if right < elements.count && precedes(elements[right], elements[next]) {
                next = right
            }
            guard next != parent else {
                return first
            }
            elements.swapAt(parent, next)
            parent = next
        }
    }
}

extension BinaryHeap: Sendable where Element: Sendable {}
