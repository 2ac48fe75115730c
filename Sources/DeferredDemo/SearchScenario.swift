import DeferredExecutors
import Dispatch
import Foundation

/// Why a search did not produce results.
enum SearchError: CancellableError {
    case cancelled
    case tooShort
}

/// A search service over a word list that answers after a delay, and stops when cancelled.
final class WordSearch: Sendable {
    private let words: [String]
    private let clock: Clock
    private let backend = DispatchQueue(label: "search.backend", attributes: .concurrent)

    init(words: [String], clock: Clock) {
        self.words = words
        self.clock = clock
    }

    /// Finds the words that start with `prefix`, about 40 ms later.
    func search(_ prefix: String) -> Attempt<[String], SearchError> {
        let query = DeferredAttempt<[String], SearchError>()
        guard prefix.count >= 2 else {
            query.fail(with: .tooShort)
            return query.attempt
        }
        query.onCancel { [clock] in clock.log("backend: query '\(prefix)' cancelled, work stopped") }
        backend.asyncAfter(deadline: .now() + .milliseconds(40)) { [words] in
            guard !query.isCancelled else {
                return  // the consumer gave up; skip the work
            }
            query.succeed(with: words.filter { $0.hasPrefix(prefix) })
        }
        return query.attempt
    }
}

func runSearchScenario() {
    let clock = Clock()
    let words = ["swallow", "swamp", "swan", "swift", "swiftly", "swim", "swimmer", "swing", "switch", "sword"]
    let service = WordSearch(words: words, clock: clock)
    let ui = ThreadExecutor(name: "ui")
    let shown = Deferred<[String]>()

    // Each keystroke starts a new query and cancels the previous one, so only the latest
    // query's results ever reach the screen.
    var current: Attempt<[String], SearchError>?
    for text in ["s", "sw", "swi", "swim", "swimm"] {
        current?.cancel()
        clock.log("user typed '\(text)'")
        let query = service.search(text)
        query.uponSuccess(ui) { matches in
            clock.log("ui: showing \(matches) for '\(text)'")
            shown.fill(with: matches)
        }
        // A cancelled query reaches neither handler: cancel() withdraws its deliveries, even one
        // whose results had already arrived.
        query.uponFailure(ui) { error in
            if case .tooShort = error {
                clock.log("ui: '\(text)' is too short to search")
            }
        }
        current = query
        Thread.sleep(forTimeInterval: 0.015)  // the user types the next letter
    }
    let results = shown.wait(for: .seconds(2)) ?? []
    _ = ui.shutdown().wait(until: .distantFuture)
    clock.log("done: the screen shows \(results.count) result(s), from the last query only")
}
