public import Deferred
import Dispatch
import NIOCore
import NIOEmbedded
import NIOPosix
@preconcurrency import OpenCombine
import Synchronization

/// The event loop for scenarios where NIO futures cross threads: one loop thread, as an
/// application with its own event loop would have.
let nioLoop: any EventLoop = MultiThreadedEventLoopGroup.singleton.next()

/// A queue that fills futures "from another thread" in the async scenarios.
let fillingQueue = DispatchQueue(label: "benchmark.filling")

/// An unfilled OpenCombine future and the promise that fills it.
///
/// Combine's `Future` runs its closure at once; to fill it later, the promise has to be
/// carried out of the closure, which costs Combine users the same box it costs here.
func makeCombineFuture() -> (future: OpenCombine.Future<Int, Never>, promise: OpenCombine.Future<Int, Never>.Promise) {
    final class PromiseBox {
        var promise: OpenCombine.Future<Int, Never>.Promise?
    }
    let box = PromiseBox()
    let future = OpenCombine.Future<Int, Never> { box.promise = $0 }
    return (future, box.promise!)
}

/// A one-shot value exchanged between two tasks with a bare `CheckedContinuation`: the
/// smallest future Swift Concurrency offers.
final class Rendezvous: Sendable {
    private enum State {
        case empty
        case waiting(CheckedContinuation<Int, Never>)
        case filled(Int)
    }

    private let state = Mutex(State.empty)

    /// Delivers `value` to the waiter, or keeps it for the next one.
    func fill(_ value: Int) {
        let waiter: CheckedContinuation<Int, Never>? = state.withLock { state in
            if case .waiting(let continuation) = state {
                state = .filled(value)
                return continuation
            }
            state = .filled(value)
            return nil
        }
        waiter?.resume(returning: value)
    }

    /// The value, once it is filled.
    var value: Int {
        get async {
            await withCheckedContinuation { continuation in
                let value: Int? = state.withLock { state in
                    if case .filled(let value) = state {
                        return value
                    }
                    state = .waiting(continuation)
                    return nil
                }
                if let value {
                    continuation.resume(returning: value)
                }
            }
        }
    }
}

/// Runs `body` in a task and blocks the calling thread until it finishes, so that async work
/// can be measured like any other trial.
func runBlocking(_ body: @escaping @Sendable () async -> Void) {
    let finished = DispatchSemaphore(value: 0)
    Task {
        await body()
        finished.signal()
    }
    finished.wait()
}

/// The failure of the failable scenarios (S10, S11, S17, S18, and the gateway): a typed error
/// with a cancellation case.
///
/// One type for all of them: the optimizer merges the specializations of two error types with
/// the same layout behind thunks, which would add instructions to the counted scenarios.
public enum BenchFailure: CancellableError {
    /// The work failed.
    case failed
    /// A gateway request's time limit passed.
    case timedOut
    /// The work was cancelled.
    case cancelled
}

/// An unfilled, failable OpenCombine future and the promise that fills it; see
/// ``makeCombineFuture()``.
func makeFailableCombineFuture() -> (
    future: OpenCombine.Future<Int, BenchFailure>, promise: OpenCombine.Future<Int, BenchFailure>.Promise
) {
    final class PromiseBox {
        var promise: OpenCombine.Future<Int, BenchFailure>.Promise?
    }
    let box = PromiseBox()
    let future = OpenCombine.Future<Int, BenchFailure> { box.promise = $0 }
    return (future, box.promise!)
}

extension Scenario {
    /// NIO's side of S1 and S10: a promise made, succeeded, and observed inline.
    ///
    /// NIO's futures are failable, so one trial serves both scenarios.
    static let nioCreateFillUpon: @Sendable (Int) -> Trial = { count in
        let loop = EmbeddedEventLoop()
        return Trial {
            for index in 0..<count {
                let promise = loop.makePromise(of: Int.self)
                promise.succeed(index)
                promise.futureResult.whenSuccess(consume)
            }
        }
    }

    /// NIO's side of S4 and S11: a promise, a thousand inline maps, success, then a read of
    /// the tail.
    static let nioMapChain: @Sendable (Int) -> Trial = { count in
        let loop = EmbeddedEventLoop()
        return Trial {
            for _ in 0..<count / chainLength {
                let root = loop.makePromise(of: Int.self)
                var tail = root.futureResult
                for _ in 0..<chainLength {
                    tail = tail.map { $0 &+ 1 }
                }
                root.succeed(0)
                tail.whenSuccess(consume)
            }
        }
    }
}
