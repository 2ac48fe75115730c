import Deferred
import Dispatch

/// Recommendations from a service that is sometimes slow.
private func recommendations(for user: String, takingMilliseconds delay: Int) -> Future<[String]> {
    let reply = Deferred<[String]>()
    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(delay)) {
        reply.fill(with: ["\(user)'s pick 1", "\(user)'s pick 2"])
    }
    return Future(reply)
}

func runTimeoutScenario() {
    let clock = Clock()
    let fallback = ["bestseller 1", "bestseller 2"]
    let limit = Duration.milliseconds(60)
    clock.log("asking for recommendations; after \(limit) the bestsellers stand in")

    let fast = recommendations(for: "ada", takingMilliseconds: 20)
        .timeout(after: limit, upon: DispatchQueue.global(), substituting: fallback)
    let slow = recommendations(for: "bob", takingMilliseconds: 200)
        .timeout(after: limit, upon: DispatchQueue.global(), substituting: fallback)

    let shown = Deferred<Void>()
    let screen = DispatchQueue(label: "screen")
    fast.upon(screen) { clock.log("ada sees \($0.joined(separator: ", "))") }
    slow.upon(screen) {
        clock.log("bob sees \($0.joined(separator: ", "))\($0 == fallback ? " (the fallback)" : "")")
        shown.fill()
    }

    // A command-line program may block; an app would use upon or await instead.
    _ = shown.wait(for: .seconds(5))
    screen.sync {}
    clock.log("done; bob's late reply is dropped when it arrives")
}
