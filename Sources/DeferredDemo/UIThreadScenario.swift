import DeferredExecutors
import Dispatch
import Foundation

/// What one row of a list shows, kept on the UI thread.
private final class RowView: Sendable {
    let title = Deferred<String>()
}

/// A slow image service: each request's reply takes a different time.
private func loadTitle(for row: Int, after milliseconds: Int) -> Future<String> {
    let title = Deferred<String>()
    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(milliseconds)) {
        title.fill(with: "photo #\(row)")
    }
    return Future(title)
}

func runUIThreadScenario() {
    let clock = Clock()
    // A dedicated thread with its own run loop stands in for a UI thread: every update of the
    // "UI" happens on it, in order.
    let ui = ThreadExecutor(name: "ui")

    // A reused cell: it first shows row 1, then is reused for row 2 before row 1's slow reply
    // arrives. Invalidating the first request's token keeps that late reply out of the cell.
    let cell = RowView()
    let firstRequest = InvalidationToken()
    loadTitle(for: 1, after: 60).upon(firstRequest.validating(ui)) { title in
        clock.log("\(Thread.current.name ?? "?"): cell shows \(title)")
        cell.title.fill(with: title)
    }
    clock.log("cell reused for row 2; the request for row 1 is invalidated")
    firstRequest.invalidate()
    let secondRequest = InvalidationToken()
    loadTitle(for: 2, after: 20).upon(secondRequest.validating(ui)) { title in
        clock.log("\(Thread.current.name ?? "?"): cell shows \(title)")
        cell.title.fill(with: title)
    }

    // Wait for both replies to have come and gone, then look at the cell from the UI thread.
    Thread.sleep(forTimeInterval: 0.1)
    let shown = Future(upon: ui) { cell.title.peek() ?? "nothing" }
    clock.log("the cell shows \(shown.wait(until: .distantFuture) ?? "?"): row 1's late reply was dropped")
    _ = ui.shutdown().wait(until: .distantFuture)
    clock.log("the ui thread has stopped")

    // After shutdown a body is refused: it is released at once and never runs.
    let late = Deferred<String>()
    ui.submit { late.fill(with: "ran") }
    clock.log("a body submitted after shutdown \(late.peek() == nil ? "was released without running" : "ran?")")
}
