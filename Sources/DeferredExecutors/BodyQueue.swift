/// Bodies in submission order, each taken in O(1): an array read from a moving front, whose
/// taken slots are cleared at once (so captures are released when their body is taken) and
/// reclaimed once they are half of the array.
struct BodyQueue: Sendable {
    private var bodies: [(@Sendable () -> Void)?] = []
    private var front = 0

    var isEmpty: Bool { front == bodies.count }

    mutating func append(_ body: @escaping @Sendable () -> Void) {
        bodies.append(body)
    }

    mutating func popFirst() -> (@Sendable () -> Void)? {
        guard front < bodies.count else {
            return nil
        }
        let body = bodies[front].take()
        front += 1
        if front == bodies.count {
            bodies.removeAll(keepingCapacity: true)
            front = 0
        } else if front >= 64 && front * 2 >= bodies.count {
            bodies.removeFirst(front)
            front = 0
        }
        return body
    }
}
