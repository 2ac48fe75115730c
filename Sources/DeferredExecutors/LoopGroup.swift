public import Deferred
import Foundation
import Synchronization

/// A fixed set of ``LoopExecutor``s, one thread each: the server configuration.
///
/// A service makes one group for the process and pins each request to one of its loops: it
/// takes ``next()`` when the request comes and runs the request's stages, callbacks and time
/// limits there. Each loop keeps its own timers, so a request's limits are armed and withdrawn
/// on its own thread, and requests on different loops share nothing.
///
/// ```swift
/// let loops = LoopGroup()  // one loop per processor
///
/// func handle(_ request: Request) -> Attempt<Response, any Error> {
///     let loop = loops.next()
///     return backends.map { $0.call(request) }.allSucceeded()
///         .map(upon: loop, transform: Response.init)
///         .timeout(after: .milliseconds(150), upon: loop)
/// }
/// ```
///
/// See <doc:ServingRequestsOnLoops> for when to use it instead of Dispatch queues.
public final class LoopGroup: Sendable {
    /// The loops, each with a thread of its own.
    public let loops: [LoopExecutor]

    /// Counts the calls of ``next()``.
    private let cursor = Atomic<UInt>(0)

    /// Starts `count` loops, named `name` followed by each one's number, and returns once all
    /// are ready.
    ///
    /// - Parameters:
    ///   - count: How many loops, at least one; `nil` (the default) for one per active processor.
    ///   - name: The prefix of the loops' names.
    public init(loops count: Int? = nil, name: String = "LoopGroup") {
        let count = count ?? ProcessInfo.processInfo.activeProcessorCount
        precondition(count > 0, "a LoopGroup needs at least one loop (asked for \(count))")
        loops = (0..<count).map { LoopExecutor(name: "\(name) \($0)") }
    }

    deinit {
        for loop in loops {
            loop.shutdown()
        }
    }

    /// The loop for the next request: each loop in turn.
    ///
    /// - Returns: One of ``loops``.
    public func next() -> LoopExecutor {
        loops[Int(cursor.wrappingAdd(1, ordering: .relaxed).oldValue % UInt(loops.count))]
    }

    /// Shuts every loop down (see ``LoopExecutor/shutdown()``).
    ///
    /// - Returns: A future filled once every loop's thread has finished.
    @discardableResult
    public func shutdown() -> Future<Void> {
        loops.map { $0.shutdown() }.allFilled().map(upon: .immediate) { _ in }
    }
}
