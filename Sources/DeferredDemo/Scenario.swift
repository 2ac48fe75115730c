import Dispatch

/// One runnable demonstration.
struct Scenario {
    /// The name to select it on the command line.
    let name: String
    /// One line on what it shows.
    let summary: String
    /// Runs it to completion, printing as it goes.
    let run: () -> Void
}

/// Prints lines prefixed with the milliseconds since the clock was made.
struct Clock: Sendable {
    private let start = DispatchTime.now()

    /// Prints `message` with the elapsed time.
    func log(_ message: String) {
        let milliseconds = (DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1_000_000
        let stamp = String(milliseconds)
        print("[\(String(repeating: " ", count: max(0, 4 - stamp.count)))\(stamp) ms] \(message)")
    }
}
