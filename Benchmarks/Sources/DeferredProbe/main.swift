// One scenario's Deferred side, N times, and nothing else: what `Scripts/count-atomics` runs
// under callgrind to count instructions, atomic read-modify-writes and reference counting per
// operation (N operations, minus a run with N = 0).
//
// Usage: deferred-probe S1|S4|S10|S11|S13 N
import Deferred
import DeferredExecutors

#if canImport(Glibc)
    import Glibc  // exit
#elseif canImport(Darwin)
    import Darwin  // exit
#endif

/// The failure of the attempt scenarios.
enum ProbeFailure: CancellableError {
    case cancelled
}

/// Keeps the optimizer from removing the work.
@inline(never)
func consume(_ value: Int) {
    if value == -12_345 {
        print(value)
    }
}

let arguments = CommandLine.arguments
guard arguments.count == 3, let count = Int(arguments[2]) else {
    print("usage: deferred-probe S1|S4|S10|S11|S13 N")
    exit(2)
}
switch arguments[1] {
case "S1":
    // Create, fill, then one inline handler.
    for index in 0..<count {
        let deferred = Deferred<Int>()
        deferred.fill(with: index)
        deferred.upon(.immediate, execute: consume)
    }
case "S4":
    // A chain of N maps on an unfilled root, filled, the tail read: per stage.
    let root = Deferred<Int>()
    var tail = Future(root)
    for _ in 0..<count {
        tail = tail.map(upon: .immediate) { $0 &+ 1 }
    }
    root.fill(with: 0)
    consume(tail.peek() ?? 0)
case "S10":
    // Create a pending attempt, succeed it, then one inline success handler.
    for index in 0..<count {
        let writer = DeferredAttempt<Int, ProbeFailure>()
        writer.succeed(with: index)
        writer.attempt.uponSuccess(.immediate, execute: consume)
    }
case "S11":
    // A chain of N attempt maps on a pending attempt, succeeded, the tail read: per stage.
    let root = DeferredAttempt<Int, ProbeFailure>()
    var tail = root.attempt
    for _ in 0..<count {
        tail = tail.map(upon: .immediate) { $0 &+ 1 }
    }
    root.succeed(with: 0)
    if case .success(let value) = tail.peek() {
        consume(value)
    }
case "S13":
    // N bodies scheduled on a virtual clock in reverse order of due time, then one advance past
    // them: per body.
    let clock = VirtualTimeExecutor()
    for index in 0..<count {
        clock.submit(after: .nanoseconds(count - index)) { consume(index) }
    }
    clock.advance(by: .nanoseconds(count + 1))
default:
    print("unknown scenario \(arguments[1])")
    exit(2)
}
