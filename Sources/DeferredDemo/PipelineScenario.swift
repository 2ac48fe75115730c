import Deferred
import Dispatch

func runPipelineScenario() {
    let clock = Clock()
    let upload = Deferred<[UInt8]>()

    // `map` runs once, eagerly, where you say; `lazy.map` is a view recomputed on every read.
    let size = upload.map(upon: .global()) { $0.count }
    let checksum = upload.map(upon: .global()) { bytes in bytes.reduce(0) { ($0 &* 31) &+ Int($1) } }
    let label = size.lazy.map { "\($0) bytes" }

    // `andThen` chains a step that is itself asynchronous.
    let receipt = checksum.andThen(upon: .global()) { sum in
        Future(upon: .global()) { "receipt #\(sum % 10_000)" }
    }

    label.upon(.immediate) { clock.log("size: \($0)") }
    receipt.upon(.immediate) { clock.log("stored with \($0)") }

    clock.log("filling the upload")
    upload.fill(with: Array("Deferred gives a value that arrives later a type.".utf8))
    clock.log("a second fill is refused: fill returned \(upload.fill(with: []))")

    // A chain of a hundred thousand steps on the immediate executor fills without deep recursion.
    let root = Deferred<Int>()
    var tail = Future(root)
    for _ in 0..<100_000 {
        tail = tail.map(upon: .immediate) { $0 + 1 }
    }
    root.fill(with: 0)
    clock.log("100,000 chained maps gave \(tail.peek() ?? -1)")

    _ = receipt.wait(for: .seconds(5))
    clock.log("done: \(receipt)")
}
