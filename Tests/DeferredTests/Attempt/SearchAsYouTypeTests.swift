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

/// Search-as-you-type over main-actor state: each keystroke, on the main actor, cancels the
/// previous search and starts the next, whose result a main-actor delivery shows.
///
/// Only the current query's results may ever reach the screen, whichever main-actor delivery
/// shows them.
@Suite struct MainActorSearchAsYouTypeTests {
    @MainActor final class Screen {
        var query = -1
        var shown = -1
        var delivered = 0
        var stale = 0

        func show(_ results: Int) {
            delivered += 1
            if results != query {
                stale += 1
            }
            shown = results
        }
    }

    /// How the screen receives the results.
    enum Delivery: String, CaseIterable, CustomTestStringConvertible {
        case uponSuccess, uponMainActor

        var testDescription: String { rawValue }
    }

    static let keystrokes = TestSize.sanitized(2_000)

    @Test(arguments: Delivery.allCases) @MainActor
    func thousandsOfKeystrokesShowOnlyCurrentResults(_ delivery: Delivery) async {
        let screen = Screen()
        var previous: Attempt<Int, TestError>?
        for keystroke in 0..<Self.keystrokes {
            // The keystroke's own main-actor work, during which the previous search may answer
            // and its delivery wait for the main actor, behind this keystroke.
            let busy = ContinuousClock.now + .microseconds(Int.random(in: 0...200))
            while ContinuousClock.now < busy {}
            previous?.cancel()
            screen.query = keystroke
            let writer = DeferredAttempt<Int, TestError>()
            DispatchQueue.global().asyncAfter(deadline: .now() + .microseconds(Int.random(in: 0...400))) {
                writer.succeed(with: keystroke)
            }
            let search = writer.attempt.map(upon: .immediate) { $0 }
            switch delivery {
            case .uponSuccess:
                search.uponSuccess(.mainActor) { screen.show($0) }
            case .uponMainActor:
                search.uponMainActor { result in
                    if case .success(let results) = result {
                        screen.show(results)
                    }
                }
            }
            previous = search
            // The next keystroke comes after a moment like the search's own, so that results
            // often arrive just before it, and their deliveries are on their way as it cancels.
            try? await Task.sleep(for: .microseconds(Int.random(in: 0...300)))
        }
        let last = Self.keystrokes - 1
        let deadline = ContinuousClock.now + .seconds(30)
        while screen.shown != last && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(1))
        }
        #expect(screen.shown == last, "the last query's results arrived")
        #expect(screen.stale == 0, "no superseded query's results reached the screen")
        progress(
            "search as you type on the main actor (\(delivery)): \(Self.keystrokes) keystrokes, "
                + "\(screen.delivered) results shown, \(screen.stale) stale")
    }
}
