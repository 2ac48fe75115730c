import Deferred
import Dispatch
import Foundation

/// Blocking waits and cancellable awaits: what each costs, and what each leaves behind.
func runWaitingScenario() {
    let clock = Clock()

    // Two threads hand values back and forth, each blocking until the other's reply: a
    // blocking wait polls briefly before it sleeps, so a reply that comes at once is caught
    // without waking a sleeping thread.
    let rounds = 20_000
    let pings = (0..<rounds).map { _ in Deferred<Int>() }
    let pongs = (0..<rounds).map { _ in Deferred<Int>() }
    Thread {
        for round in 0..<rounds {
            pongs[round].fill(with: (pings[round].wait(until: .distantFuture) ?? 0) + 1)
        }
    }.start()
    let started = DispatchTime.now()
    for round in 0..<rounds {
        pings[round].fill(with: round)
        _ = pongs[round].wait(until: .distantFuture)
    }
    let perRound = Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / Double(rounds) / 1_000
    clock.log("\(rounds) round trips between two threads: \(String(format: "%.1f", perRound)) µs each")

    // A wait whose deadline passes returns nil and leaves nothing registered on the future, so
    // a loop that polls an unfilled future with short waits costs no memory.
    let reply = Deferred<String>()
    var timedOut = 0
    for _ in 0..<1_000 where reply.wait(for: .microseconds(50)) == nil {
        timedOut += 1
    }
    clock.log("\(timedOut) waits of 50 µs timed out on an unfilled future, each leaving nothing behind")

    // A task waiting with `get()` can be cancelled: it leaves the future, which others still
    // wait for.
    let outcome = Deferred<String>()
    let waiter = Task {
        do {
            return try await reply.get()
        } catch {
            return "\(type(of: error))"  // get() throws only CancellationError
        }
    }
    Task {
        outcome.fill(with: await waiter.value)
    }
    waiter.cancel()
    let thrown = outcome.wait(until: .distantFuture) ?? "?"
    clock.log("a task awaiting the reply with get() was cancelled; it got '\(thrown)'")
    reply.fill(with: "hello")
    clock.log("the reply arrives for everyone still waiting: '\(reply.wait(until: .distantFuture) ?? "?")'")
}
