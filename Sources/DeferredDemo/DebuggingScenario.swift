import Deferred
import Dispatch
import Foundation

/// A profile service with a bug: on a reply it cannot read, it forgets to answer.
private struct ProfileService: Sendable {
    /// The profile as a plain future: the forgotten path leaves it unfilled.
    func name(of reply: String) -> Future<String> {
        let name = Deferred<String>()
        DispatchQueue.global().async {
            guard reply.hasPrefix("name:") else {
                return  // the bug: nothing fills `name`
            }
            name.fill(with: String(reply.dropFirst(5)))
        }
        return Future(name)
    }

    /// The same service with an attempt: the forgotten path fails it as abandoned.
    func attemptName(of reply: String) -> Attempt<String, any Error> {
        let writer = DeferredAttempt<String, any Error>()
        let attempt = writer.attempt
        DispatchQueue.global().async {
            guard reply.hasPrefix("name:") else {
                return  // the same bug; the writer goes with this closure
            }
            writer.succeed(with: String(reply.dropFirst(5)))
        }
        return attempt
    }
}

func runDebuggingScenario() {
    let clock = Clock()
    let service = ProfileService()

    // An attempt answers at once when its writer is lost, naming where it was made.
    for reply in ["name:Ada", "garbage"] {
        switch service.attemptName(of: reply).wait(for: .seconds(5)) {
        case .success(let name)?: clock.log("attempt for '\(reply)': \(name)")
        case .failure(let error)?: clock.log("attempt for '\(reply)' failed at once: \(error)")
        case nil: clock.log("attempt for '\(reply)': no answer in 5 s")
        }
    }

    // A plain future cannot fail: ask which futures were left pending, and where they were made.
    let (_, pending) = PendingFutures.madeDuring {
        let names = ["name:Grace", "garbage"].map { service.name(of: $0) }
        _ = names[0].wait(for: .seconds(5))  // this reply arrives
        _ = names[1].wait(for: .milliseconds(100))  // this one never will
        for name in names {
            clock.log("future: \(String(reflecting: name))")
        }
    }
    for future in pending {
        clock.log("left pending: \(future)")
    }

    // A screen stuck on a spinner: one dump shows the whole chain, from the writer nobody filled
    // down to the task that waits for it, each with its age.
    PendingFutures.isTracking = true
    let profile = service.name(of: "garbage").named("profile 42")
    let greeting = profile.map(upon: .global()) { "Hello, \($0)!" }
    let spinner = Task(name: "Profile screen") { try? await greeting.get() }
    var dump = PendingFutures.snapshotDump
    for _ in 0..<1_000 where !dump.chains.contains(where: { $0.waiter?.kind == .task }) {
        Thread.sleep(forTimeInterval: 0.001)
        dump = PendingFutures.snapshotDump
    }
    clock.log("PendingFutures.dump():")
    print(dump)
    spinner.cancel()
    PendingFutures.isTracking = false
}
