/// Bodies waiting for a deadline, taken earliest first and, among equal deadlines, in the order
/// they were scheduled; scheduling, taking and cancelling one are O(log n) or better.
///
/// The heap orders small plain entries (deadline, sequence, slot) and the bodies wait in slots
/// beside it, so sifting moves no closure and costs no reference counting. A slot freed by a
/// taken or cancelled body is reused; an entry whose slot no longer holds its sequence was
/// cancelled and is skipped when it comes up.
///
/// Not thread-safe: its owner keeps it behind a lock.
struct TimerQueue<Deadline: Comparable & Sendable>: Sendable {
    /// What the heap orders: plain values only.
    private struct Entry: Sendable {
        let deadline: Deadline
        let sequence: Int
        let slot: Int

        func precedes(_ other: Entry) -> Bool {
            deadline < other.deadline || (deadline == other.deadline && sequence < other.sequence)
        }
    }

    /// A body and the sequence number it was scheduled with.
    private struct Slot: Sendable {
        var sequence: Int
        var body: (@Sendable () -> Void)?
    }

    private var heap: [Entry] = []
    private var slots: [Slot] = []
    private var freeSlots: [Int] = []
    private var nextSequence = 0

    /// How many bodies wait (cancelled ones excluded).
    private(set) var count = 0

    /// Whether no body waits.
    var isEmpty: Bool { count == 0 }

    /// The deadline of the earliest body that waits, if any.
    var firstDeadline: Deadline? {
        mutating get {
            dropCancelledFront()
            return heap.first?.deadline
        }
    }

    /// Names one scheduled body, for ``cancel(_:)``.
    struct Ticket: Sendable {
        fileprivate let slot: Int
        fileprivate let sequence: Int
    }

    /// Schedules `body` for `deadline`; returns its ticket, for ``cancel(_:)``.
    @discardableResult
    mutating func insert(deadline: Deadline, _ body: @escaping @Sendable () -> Void) -> Ticket {
        let sequence = nextSequence
        nextSequence += 1
        let slot: Int
        if let free = freeSlots.popLast() {
            slot = free
            slots[slot] = Slot(sequence: sequence, body: body)
        } else {
            slot = slots.count
            slots.append(Slot(sequence: sequence, body: body))
        }
        count += 1
        heap.append(Entry(deadline: deadline, sequence: sequence, slot: slot))
        siftUp(heap.count - 1)
        return Ticket(slot: slot, sequence: sequence)
    }

    /// Takes the earliest body and its deadline if it is due by `end`.
    mutating func popFirst(dueBy end: Deadline) -> (deadline: Deadline, body: @Sendable () -> Void)? {
        dropCancelledFront()
        guard let first = heap.first, first.deadline <= end else {
            return nil
        }
        removeFirst()
        return (first.deadline, take(first.slot))
    }

    /// Removes the body scheduled with `ticket` if it still waits; returns it, for the caller
    /// to release outside its lock.
    mutating func cancel(_ ticket: Ticket) -> (@Sendable () -> Void)? {
        guard ticket.slot < slots.count, slots[ticket.slot].sequence == ticket.sequence,
            slots[ticket.slot].body != nil
        else {
            return nil
        }
        // The entry stays in the heap and is skipped when it comes up.
        slots[ticket.slot].sequence = -1
        return take(ticket.slot)
    }

    /// Takes every body out, earliest first, leaving the queue empty.
    mutating func removeAll() -> [@Sendable () -> Void] {
        var bodies: [@Sendable () -> Void] = []
        while let first = heap.first {
            removeFirst()
            if slots[first.slot].sequence == first.sequence, slots[first.slot].body != nil {
                bodies.append(take(first.slot))
            }
        }
        slots = []
        freeSlots = []
        return bodies
    }

    // MARK: The heap

    private mutating func take(_ slot: Int) -> @Sendable () -> Void {
        let body = slots[slot].body.take()!
        freeSlots.append(slot)
        count -= 1
        return body
    }

    /// Drops cancelled entries from the top, so that the top is a body that waits.
    private mutating func dropCancelledFront() {
        while let first = heap.first, slots[first.slot].sequence != first.sequence {
            removeFirst()
        }
    }

    private mutating func removeFirst() {
        let last = heap.removeLast()
        if !heap.isEmpty {
            heap[0] = last
            siftDown(0)
        }
    }

    private mutating func siftUp(_ start: Int) {
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

    private mutating func siftDown(_ start: Int) {
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
