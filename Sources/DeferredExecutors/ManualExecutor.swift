public import Deferred
import Synchronization

/// An executor that keeps its bodies until its owner runs them.
///
/// Nothing runs on its own: the owner calls ``runUntilIdle()`` (say, once per frame of a
/// game loop or per turn of a UI-like loop) or ``runOne()`` to step through work
/// deterministically in a test. Bodies run in the order they were submitted, on the thread
/// that drains; any thread may submit, and a body may submit more work.
///
/// ```swift
/// let frame = ManualExecutor()
/// score.upon(frame) { hud.show($0) }
/// // ... in the game loop:
/// frame.runUntilIdle()
/// ```
public final class ManualExecutor: Executor {
    private let pending = AtomicStack<Work>()
    private let nextSequence = Atomic<Int>(0)

    /// A body with its place in the submission order.
    private struct Work: Sendable {
        let sequence: Int
        let body: @Sendable () -> Void
    }

    /// Creates an executor with no pending work.
    public init() {}

    /// Keeps `body` until the owner runs it.
    public func submit(_ body: @escaping @Sendable () -> Void) {
        pending.push(Work(sequence: nextSequence.add(1, ordering: .relaxed).oldValue, body: body))
    }

    /// Whether bodies are waiting to run.
    public var hasPendingWork: Bool {
        !pending.isEmpty
    }

    /// Runs the oldest pending body, if there is one.
    ///
    /// - Returns: Whether a body ran.
    @discardableResult
    public func runOne() -> Bool {
        var work = takeInOrder()
        guard !work.isEmpty else {
            return false
        }
        let first = work.removeFirst()
        for later in work {
            pending.push(later)
        }
        first.body()
        return true
    }

    /// Runs pending bodies, oldest first, until none is left, including bodies that they
    /// submit.
    ///
    /// A body that keeps submitting more work keeps this call running.
    ///
    /// - Returns: How many bodies ran.
    @discardableResult
    public func runUntilIdle() -> Int {
        var count = 0
        while true {
            var work = takeInOrder()
            guard !work.isEmpty else {
                return count
            }
            work.removeEach { item in
                item.body()
                count += 1
            }
        }
    }

    /// Takes every pending body, oldest first.
    ///
    /// Bodies put back by ``runOne()`` may sit above newer ones on the stack, so the order
    /// comes from the sequence numbers.
    private func takeInOrder() -> [Work] {
        pending.takeAll().sorted { $0.sequence < $1.sequence }
    }
}
