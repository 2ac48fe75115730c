/// Elements waiting for a deadline, taken earliest first and, among equal deadlines, in the order
/// they were inserted: the one timer heap of the library, behind `DispatchTimers`, a
/// `ThreadExecutor`'s timers and a `VirtualTimeExecutor`'s clock.
///
/// The heap orders small plain entries (deadline, sequence, slot) and the elements wait in slots
/// beside it, so sifting moves no reference and costs no reference counting. Inserting and taking
/// are O(log n); cancelling by ticket is O(1): the slot's sequence is cleared, the entry stays in
/// the heap and is skipped when it comes up (an entry whose slot no longer holds its sequence),
/// and the slot is reused only then, so a slot never holds two entries' elements.
///
/// Not thread-safe: its owner keeps it behind a lock or on one queue.
@usableFromInline
package struct TimerHeap<Deadline: Comparable & Sendable, Element: Sendable>: Sendable {
    /// What the heap orders: plain values only.
    @usableFromInline
    internal struct Entry: Sendable {
        @usableFromInline let deadline: Deadline
        @usableFromInline let sequence: UInt64
        @usableFromInline let slot: Int

        @inlinable
        init(deadline: Deadline, sequence: UInt64, slot: Int) {
            self.deadline = deadline
            self.sequence = sequence
            self.slot = slot
        }

        @inlinable
        func precedes(_ other: Entry) -> Bool {
            deadline < other.deadline || (deadline == other.deadline && sequence < other.sequence)
        }
    }

    /// An element and the sequence of the entry it belongs to (``cancelled`` once cancelled).
    @usableFromInline
    internal struct Slot: Sendable {
        @usableFromInline var sequence: UInt64
        @usableFromInline var element: Element?

        @inlinable
        init(sequence: UInt64, element: Element?) {
            self.sequence = sequence
            self.element = element
        }
    }

    @usableFromInline internal var heap: [Entry] = []
    @usableFromInline internal var slots: [Slot] = []
    @usableFromInline internal var freeSlots: [Int] = []
    @usableFromInline internal var nextSequence: UInt64 = 0

    /// The sequence of a cancelled element's slot, which no entry has.
    @inlinable
    internal static var cancelled: UInt64 { .max }

    @usableFromInline internal var waiting = 0

    /// How many elements wait (cancelled ones excluded).
    @inlinable
    package var count: Int { waiting }

    /// An empty heap.
    @inlinable
    package init() {}

    /// Whether no element waits.
    @inlinable
    package var isEmpty: Bool { waiting == 0 }

    /// Names one inserted element, for ``cancel(_:)``.
    @usableFromInline
    package struct Ticket: Sendable {
        @usableFromInline let slot: Int
        @usableFromInline let sequence: UInt64

        @inlinable
        init(slot: Int, sequence: UInt64) {
            self.slot = slot
            self.sequence = sequence
        }
    }

    /// Inserts `element` for `deadline`; returns its ticket, for ``cancel(_:)``.
    @inlinable
    @discardableResult
    package mutating func insert(_ element: consuming Element, at deadline: Deadline) -> Ticket {
        let sequence = nextSequence
        nextSequence &+= 1
        let slot: Int
        if let free = freeSlots.popLast() {
            slot = free
            slots[slot] = Slot(sequence: sequence, element: element)
        } else {
            slot = slots.count
            slots.append(Slot(sequence: sequence, element: element))
        }
        waiting += 1
        heap.append(Entry(deadline: deadline, sequence: sequence, slot: slot))
        siftUp(heap.count - 1)
        return Ticket(slot: slot, sequence: sequence)
    }

    /// The earliest element that waits and its deadline, left in place.
    @inlinable
    package var first: (deadline: Deadline, element: Element)? {
        mutating get {
            dropCancelledFront()
            guard let entry = heap.first else {
                return nil
            }
            return (entry.deadline, slots[entry.slot].element.unsafelyUnwrapped)
        }
    }

    /// The deadline of the earliest element that waits, if any.
    @inlinable
    package var firstDeadline: Deadline? {
        mutating get {
            dropCancelledFront()
            return heap.first?.deadline
        }
    }

    /// Takes the earliest element and its deadline if it is due by `end`.
    @inlinable
    package mutating func popFirst(dueBy end: Deadline) -> (deadline: Deadline, element: Element)? {
        dropCancelledFront()
        guard let entry = heap.first, entry.deadline <= end else {
            return nil
        }
        return (entry.deadline, removeFirst())
    }

    /// Takes the earliest element; the heap must not be empty (see ``first``).
    @inlinable
    package mutating func removeFirst() -> Element {
        dropCancelledFront()
        let entry = removeTop()
        return take(entry.slot, freeing: true)
    }

    /// Removes the element inserted with `ticket` if it still waits, and returns it, for the
    /// caller to release outside its lock.
    @inlinable
    package mutating func cancel(_ ticket: Ticket) -> Element? {
        guard ticket.slot < slots.count, slots[ticket.slot].sequence == ticket.sequence else {
            return nil
        }
        // The entry stays in the heap, skipped when it comes up, which frees the slot.
        slots[ticket.slot].sequence = Self.cancelled
        return take(ticket.slot, freeing: false)
    }

    /// Calls `body` with each element that waits and its deadline, in no particular order, in
    /// O(n), leaving the heap as it is.
    @inlinable
    package func forEachWaiting(_ body: (Deadline, Element) -> Void) {
        for entry in heap {
            if slots[entry.slot].sequence == entry.sequence, let element = slots[entry.slot].element {
                body(entry.deadline, element)
            }
        }
    }

    /// Removes every element for which `isRemoved` is true, in O(n); returns how many.
    @inlinable
    package mutating func removeAll(where isRemoved: (Element) -> Bool) -> Int {
        let before = waiting
        var kept: [Entry] = []
        kept.reserveCapacity(heap.count)
        for entry in heap {
            guard slots[entry.slot].sequence == entry.sequence, let element = slots[entry.slot].element else {
                freeSlots.append(entry.slot)  // Cancelled: its slot was waiting for this entry.
                continue
            }
            if isRemoved(element) {
                _ = take(entry.slot, freeing: true)
            } else {
                kept.append(entry)
            }
        }
        heap = kept
        for index in stride(from: heap.count / 2 - 1, through: 0, by: -1) {
            siftDown(index)
        }
        return before - waiting
    }

    /// Takes every element out, earliest first, leaving the heap empty.
    @inlinable
    package mutating func removeAll() -> [Element] {
        var elements: [Element] = []
        while !isEmpty {
            elements.append(removeFirst())
        }
        heap = []
        slots = []
        freeSlots = []
        return elements
    }

    // MARK: The heap

    @inlinable
    internal mutating func take(_ slot: Int, freeing: Bool) -> Element {
        let element = slots[slot].element.take().unsafelyUnwrapped
        if freeing {
            slots[slot].sequence = Self.cancelled  // No ticket names a free slot.
            freeSlots.append(slot)
        }
        waiting -= 1
        return element
    }

    /// Drops cancelled entries from the top, freeing their slots, so that the top is an element
    /// that waits.
    @inlinable
    internal mutating func dropCancelledFront() {
        while let entry = heap.first, slots[entry.slot].sequence != entry.sequence {
            _ = removeTop()
            freeSlots.append(entry.slot)
        }
    }

    @inlinable
    internal mutating func removeTop() -> Entry {
        let top = heap[0]
        let last = heap.removeLast()
        if !heap.isEmpty {
            heap[0] = last
            siftDown(0)
        }
        return top
    }

    @inlinable
    internal mutating func siftUp(_ start: Int) {
        var child = start
        let moving = heap[child]
        while child > 0 {
            let parent = (child - 1) / 2
            guard moving.precedes(heap[parent]) else {
                break
            }
            heap[child] = heap[parent]
            child = parent
        }
        heap[child] = moving
    }

    @inlinable
    internal mutating func siftDown(_ start: Int) {
        var parent = start
        let moving = heap[parent]
        let count = heap.count
        while true {
            let left = 2 * parent + 1
            guard left < count else {
                break
            }
            let right = left + 1
            let next = right < count && heap[right].precedes(heap[left]) ? right : left
            guard heap[next].precedes(moving) else {
                break
            }
            heap[parent] = heap[next]
            parent = next
        }
        heap[parent] = moving
    }
}

/// A body as a ``TimerHeap``'s element.
///
/// The closure sits inside a struct so that the heap stores it as it is: stored directly as a
/// generic element, a closure would be wrapped in a thunk on the way in and another on the way
/// out, two allocations a body.
@frozen
package struct TimedBody: Sendable {
    /// The work.
    package let run: @Sendable () -> Void

    /// Wraps `run`.
    @inlinable
    package init(_ run: @escaping @Sendable () -> Void) {
        self.run = run
    }
}
