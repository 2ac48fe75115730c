import Testing

@testable import Deferred

/// The one timer heap: due order, insertion order among equal deadlines, cancelling by ticket,
/// and the bulk removals, checked against a plain sorted model.
@Suite struct TimerHeapTests {
    @Test func elementsComeOutByDeadlineThenInsertionOrder() {
        var heap = TimerHeap<Int, Int>()
        let deadlines = [5, 3, 9, 3, 1, 5, 5, 0, 9, 2]
        for (index, deadline) in deadlines.enumerated() {
            heap.insert(index, at: deadline)
        }
        #expect(heap.count == deadlines.count)
        var taken: [Int] = []
        while let (_, element) = heap.popFirst(dueBy: .max) {
            taken.append(element)
        }
        let expected = deadlines.indices.sorted { (deadlines[$0], $0) < (deadlines[$1], $1) }
        #expect(taken == expected)
        #expect(heap.isEmpty)
    }

    @Test func onlyWhatIsDueComesOut() {
        var heap = TimerHeap<Int, String>()
        heap.insert("late", at: 10)
        heap.insert("early", at: 4)
        #expect(heap.popFirst(dueBy: 3) == nil)
        #expect(heap.popFirst(dueBy: 4)?.element == "early")
        #expect(heap.popFirst(dueBy: 9) == nil)
        #expect(heap.firstDeadline == 10)
        #expect(heap.first?.element == "late", "looking at the first takes nothing")
        #expect(heap.count == 1)
    }

    @Test func aCancelledElementIsReturnedOnceAndNeverComesOut() {
        var heap = TimerHeap<Int, Int>()
        let first = heap.insert(1, at: 1)
        let second = heap.insert(2, at: 2)
        heap.insert(3, at: 3)
        #expect(heap.cancel(first) == 1)
        #expect(heap.cancel(first) == nil, "a ticket cancels once")
        #expect(heap.count == 2)
        #expect(heap.firstDeadline == 2)
        #expect(heap.removeFirst() == 2)
        #expect(heap.cancel(second) == nil, "a ticket of a taken element cancels nothing")
        #expect(heap.popFirst(dueBy: .max)?.element == 3)
        #expect(heap.isEmpty && heap.firstDeadline == nil)
    }

    @Test func aStaleTicketNeverCancelsTheElementThatReusesItsSlot() {
        var heap = TimerHeap<Int, Int>()
        let old = heap.insert(1, at: 1)
        #expect(heap.removeFirst() == 1)
        heap.insert(2, at: 2)  // Reuses the freed slot.
        #expect(heap.cancel(old) == nil)
        #expect(heap.removeFirst() == 2)
    }

    @Test func aCancelledElementsSlotWaitsForItsEntry() {
        var heap = TimerHeap<Int, Int>()
        let cancelled = heap.insert(1, at: 100)
        #expect(heap.cancel(cancelled) == 1)
        // The cancelled entry is still in the heap: a new element must not take over its slot,
        // or the entry would come up as the new element, at the old deadline.
        heap.insert(2, at: 200)
        #expect(heap.popFirst(dueBy: 150) == nil)
        #expect(heap.popFirst(dueBy: 200)?.element == 2)
    }

    @Test(arguments: [0, 1, 2, 3])
    func removingByPredicateKeepsTheOrderOfTheRest(seed: Int) {
        var generator = SplitMix(seed: UInt64(seed))
        var heap = TimerHeap<Int, Int>()
        var model: [(deadline: Int, element: Int)] = []
        var tickets: [TimerHeap<Int, Int>.Ticket] = []
        for element in 0..<500 {
            let deadline = Int(generator.next() % 50)
            tickets.append(heap.insert(element, at: deadline))
            model.append((deadline, element))
        }
        for element in stride(from: 0, to: 500, by: 7) {
            #expect(heap.cancel(tickets[element]) == element)
        }
        model.removeAll { $0.element % 7 == 0 }
        #expect(heap.removeAll { $0 % 3 == 0 } == model.filter { $0.element % 3 == 0 }.count)
        model.removeAll { $0.element % 3 == 0 }
        #expect(heap.count == model.count)
        heap.insert(1_000, at: 25)
        model.append((25, 1_000))
        let expected = model.sorted { ($0.deadline, $0.element) < ($1.deadline, $1.element) }.map(\.element)
        var taken: [Int] = []
        while let (_, element) = heap.popFirst(dueBy: .max) {
            taken.append(element)
        }
        #expect(taken == expected)
    }

    @Test func removingEverythingHandsBackTheWaitingElementsEarliestFirst() {
        var heap = TimerHeap<Int, Int>()
        heap.insert(3, at: 30)
        let cancelled = heap.insert(1, at: 10)
        heap.insert(2, at: 20)
        _ = heap.cancel(cancelled)
        #expect(heap.removeAll() == [2, 3])
        #expect(heap.isEmpty)
        heap.insert(4, at: 5)
        #expect(heap.removeFirst() == 4, "the heap is usable after it is emptied")
    }
}

/// A small deterministic generator, so each argument is the same heap on every run.
private struct SplitMix {
    var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
