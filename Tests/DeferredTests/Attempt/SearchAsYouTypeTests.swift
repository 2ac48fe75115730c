import Deferred
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

/// Search-as-you-type written the plain way: each keystroke cancels the previous search and shows
/// the new one's results on the screen's queue.
///
/// Only the current query's results may ever reach the screen.
@Suite struct SearchAsYouTypeTests {
    /// The screen: its state is touched only on `queue`.
    final class Screen: Sendable {
        let queue = DispatchQueue(label: "screen")
        let query = Atomic<Int>(-1)
        let shown = Atomic<Int>(-1)
        let stale = Counter()
        let delivered = Counter()
        let stopped = Counter()
    }

    /// A search that answers after a random moment on another thread, and counts being told to
    /// stop.
    static func search(_ query: Int, on screen: Screen) -> Attempt<Int, TestError> {
        let writer = DeferredAttempt<Int, TestError>()
        writer.onCancel { screen.stopped.increment() }
        DispatchQueue.global().asyncAfter(deadline: .now() + .microseconds(Int.random(in: 0...1_500))) {
            writer.succeed(with: query)
        }
        return writer.attempt
    }

    @Test func threeHundredKeystrokesShowOnlyCurrentResults() {
        let screen = Screen()
        let last = 299
        let finished = DispatchSemaphore(value: 0)
        // The search each keystroke started, for the next keystroke to cancel.
        let searches = (0...last).map { _ in Deferred<Attempt<Int, TestError>>() }
        for keystroke in 0...last {
            screen.queue.async {
                if keystroke > 0 {
                    searches[keystroke - 1].peek()?.cancel()
                }
                screen.query.store(keystroke, ordering: .relaxed)
                let search = Self.search(keystroke, on: screen)
                    .map(upon: DispatchQueue.global()) { $0 }
                    .uponSuccess(screen.queue) { results in
                        screen.delivered.increment()
                        if results != screen.query.load(ordering: .relaxed) {
                            screen.stale.increment()
                        }
                        screen.shown.store(results, ordering: .relaxed)
                        if results == last {
                            finished.signal()
                        }
                    }
                searches[keystroke].fill(with: search)
            }
            usleep(UInt32.random(in: 0...1_000))
        }
        #expect(finished.wait(timeout: .now() + 30) == .success, "the last query's results arrived")
        screen.queue.sync {}
        #expect(screen.stale.value == 0, "no superseded query's results reached the screen")
        #expect(screen.shown.load(ordering: .relaxed) == last)
        progress(
            "search as you type: 300 keystrokes, \(screen.delivered.value) results shown, "
                + "\(screen.stopped.value) superseded searches told to stop, \(screen.stale.value) stale"
        )
    }
}
