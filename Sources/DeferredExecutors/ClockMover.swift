import Foundation
import Synchronization

/// Who runs a ``VirtualTimeExecutor``'s work: nobody, an advance or a run (which move the clock),
/// or a wait for armed work (which only runs what is due now), one at a time.
///
/// An advance that finds a wait running due work on another thread waits for it: the wait runs
/// a few bodies and gives the clock back, and the test that advances never learns it was there.
/// Any other overlap is a misuse and stops the program: two advances at once, an advance during a
/// run, or a body that advances the clock that runs it (even one that a wait runs).
final class ClockMover: Sendable {
    private static let free = 0
    private static let moving = 1
    private static let runningDue = 2

    private let state = Atomic<Int>(ClockMover.free)

    /// The thread of the wait that runs due work, while it does.
    private let runner = Atomic<UInt>(0)

    /// Takes the clock to move it, for `what` (named in the message if this is a misuse).
    func takeToMove(for what: String) {
        while true {
            let (exchanged, original) = state.compareExchange(
                expected: Self.free, desired: Self.moving, ordering: .acquiringAndReleasing)
            if exchanged {
                return
            }
            guard original == Self.runningDue, runner.load(ordering: .acquiring) != currentThreadIdentifier else {
                fatalError("VirtualTimeExecutor: \(what) while the clock was already advancing")
            }
            Thread.sleep(forTimeInterval: 0.000_05)  // A wait runs what is due now; it ends soon.
        }
    }

    /// Takes the clock to run what is due now, unless anyone has it; returns whether it did.
    func tryTakeToRunDue() -> Bool {
        guard
            state.compareExchange(expected: Self.free, desired: Self.runningDue, ordering: .acquiringAndReleasing)
                .exchanged
        else {
            return false
        }
        runner.store(currentThreadIdentifier, ordering: .releasing)
        return true
    }

    /// Gives the clock back.
    func release() {
        runner.store(0, ordering: .relaxed)
        state.store(Self.free, ordering: .releasing)
    }

    /// Whether nobody has the clock: a wait may run what is due.
    var isFree: Bool {
        state.load(ordering: .acquiring) == Self.free
    }
}
