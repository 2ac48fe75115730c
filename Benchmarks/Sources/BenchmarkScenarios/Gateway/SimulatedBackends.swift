import Dispatch
import Foundation

/// The backends of the gateway: a thread that answers each call after its latency, like a
/// network client's I/O thread, and that can be told to drop a call that is no longer wanted.
///
/// Every implementation calls the same backends, so the cost of a backend call is the same for
/// all; what differs is how each bridges the reply into its futures, and whether it cancels.
public final class SimulatedBackends: @unchecked Sendable {
    // @unchecked: every field is read and written under `condition`.
    private struct Entry {
        var deadline: UInt64
        var sequence: Int
        var slot: Int
        /// Whether the entry stops its call unanswered (the call's budget ends) instead of
        /// answering it.
        var stops = false
    }

    private struct Slot {
        var sequence: Int
        var reply: (@Sendable () -> Void)?
    }

    private let condition = NSCondition()
    private var heap: [Entry] = []
    private var slots: [Slot] = []
    private var freeSlots: [Int] = []
    private var nextSequence = 0
    private var stopped = false
    private let ended = DispatchSemaphore(value: 0)

    /// A call that can be dropped with ``drop(_:)``.
    public struct Call: Sendable {
        fileprivate let slot: Int
        fileprivate let sequence: Int
    }

    /// Starts the backends' thread.
    public init() {
        Thread { [self] in serve() }.start()
    }

    /// Stops the thread once it has answered every call; calls after this are never answered.
    public func stop() {
        condition.lock()
        stopped = true
        condition.signal()
        condition.unlock()
        ended.wait()
    }

    /// Calls a backend that answers after `nanoseconds`, by running `reply` on the backends' thread.
    public func call(after nanoseconds: Int, reply: @escaping @Sendable () -> Void) -> Call {
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(max(0, nanoseconds))
        condition.lock()
        let sequence = nextSequence
        nextSequence += 1
        let slot: Int
        if let free = freeSlots.popLast() {
            slot = free
            slots[slot] = Slot(sequence: sequence, reply: reply)
        } else {
            slot = slots.count
            slots.append(Slot(sequence: sequence, reply: reply))
        }
        heap.append(Entry(deadline: deadline, sequence: sequence, slot: slot))
        siftUp(heap.count - 1)
        if heap[0].sequence == sequence {
            condition.signal()
        }
        condition.unlock()
        return Call(slot: slot, sequence: sequence)
    }

    /// Makes the backend stop `call` by itself at `deadline` if it has not answered by then, as
    /// a backend told its caller's budget does: its reply never runs.
    public func stop(_ call: Call, at deadline: ContinuousClock.Instant) {
        let remaining = ContinuousClock.now.duration(to: deadline)
        let nanoseconds = max(
            0, remaining.components.seconds * 1_000_000_000 + remaining.components.attoseconds / 1_000_000_000)
        let uptime = DispatchTime.now().uptimeNanoseconds + UInt64(nanoseconds)
        condition.lock()
        if slots[call.slot].sequence == call.sequence {
            heap.append(Entry(deadline: uptime, sequence: call.sequence, slot: call.slot, stops: true))
            siftUp(heap.count - 1)
            if heap[0].sequence == call.sequence && heap[0].stops {
                condition.signal()
            }
        }
        condition.unlock()
    }

    /// Drops `call` if it has not been answered: its reply never runs.
    ///
    /// Returns whether it dropped it.
    @discardableResult
    public func drop(_ call: Call) -> Bool {
        condition.lock()
        var dropped: (@Sendable () -> Void)?
        if slots[call.slot].sequence == call.sequence, slots[call.slot].reply != nil {
            dropped = slots[call.slot].reply.take()
            slots[call.slot].sequence = -1
            freeSlots.append(call.slot)
        }
        condition.unlock()
        return dropped != nil  // Released outside the lock.
    }

    private func serve() {
        condition.lock()
        while true {
            while let first = heap.first, slots[first.slot].sequence != first.sequence {
                removeFirst()
            }
            guard let first = heap.first else {
                if stopped {
                    break
                }
                condition.wait()
                continue
            }
            let now = DispatchTime.now().uptimeNanoseconds
            guard first.deadline <= now else {
                let seconds = Double(first.deadline - now) / 1e9
                _ = condition.wait(until: Date(timeIntervalSinceNow: seconds))
                continue
            }
            removeFirst()
            let reply = slots[first.slot].reply.take()!
            slots[first.slot].sequence = -1
            freeSlots.append(first.slot)
            condition.unlock()
            if !first.stops {
                reply()
            }
            condition.lock()
        }
        condition.unlock()
        ended.signal()
    }

    private func removeFirst() {
        let last = heap.removeLast()
        guard !heap.isEmpty else {
            return
        }
        heap[0] = last
        var parent = 0
        while true {
            let left = 2 * parent + 1
            guard left < heap.count else {
                break
            }
            let right = left + 1
            let next = right < heap.count && heap[right].deadline < heap[left].deadline ? right : left
            guard heap[next].deadline < heap[parent].deadline else {
                break
            }
            heap.swapAt(parent, next)
            parent = next
        }
    }

    private func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].deadline < heap[parent].deadline else {
                break
            }
            heap.swapAt(child, parent)
            child = parent
        }
    }
}
