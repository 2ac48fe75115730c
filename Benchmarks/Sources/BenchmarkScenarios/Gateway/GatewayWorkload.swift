import Dispatch
import Synchronization

/// The service gateway of the Performance guide: each request fans out to a few backends, joins
/// their replies, combines them, and gives up at a time limit, cancelling what it no longer needs.
///
/// Every implementation runs the same requests with the same backend latencies (a function of
/// the request and the backend), keeps the same number of requests in flight, and counts the
/// same events here.
public struct GatewayWorkload: Sendable {
    /// How many requests a run makes.
    public var requests: Int
    /// How many backends each request asks.
    public var backends: Int
    /// The longest backend latency; each backend's is spread evenly from zero to this.
    public var maximumLatency: Duration
    /// The request's time limit.
    public var timeout: Duration
    /// How many requests are in flight at once: when one ends, the next starts.
    public var inFlight: Int

    /// Creates a workload.
    public init(requests: Int, backends: Int, maximumLatency: Duration, timeout: Duration, inFlight: Int) {
        self.requests = requests
        self.backends = backends
        self.maximumLatency = maximumLatency
        self.timeout = timeout
        self.inFlight = inFlight
    }

    /// The latency of `backend` for `request`, in nanoseconds: the same in every implementation.
    @inlinable
    public func latencyNanoseconds(request: Int, backend: Int) -> Int {
        var mixed = UInt64(truncatingIfNeeded: request &* 31 &+ backend) &+ 0x9E37_79B9_7F4A_7C15
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        mixed ^= mixed >> 31
        let maximum = UInt64(maximumLatency.clampedNanosecondsForGateway)
        return maximum == 0 ? 0 : Int(mixed % (maximum + 1))
    }

    /// The time limit in nanoseconds.
    public var timeoutNanoseconds: Int { timeout.clampedNanosecondsForGateway }

    /// The share of requests, from 0 to 1, that time out with exact timers.
    ///
    /// Those are the requests with a backend whose latency is longer than the limit. An implementation whose rate is far from it does
    /// other work than the rest (a limit that fires late lets more requests complete).
    public var exactTimeoutRate: Double {
        guard requests > 0 else {
            return .nan
        }
        var timeouts = 0
        for request in 0..<requests
        where (0..<backends).contains(where: { latencyNanoseconds(request: request, backend: $0) > timeoutNanoseconds })
        {
            timeouts += 1
        }
        return Double(timeouts) / Double(requests)
    }

    /// How many backend replies come after their request's time limit: the work a gateway that
    /// cannot cancel does for nothing (for requests that time out).
    public var lateReplies: Int {
        var late = 0
        for request in 0..<requests {
            let latencies = (0..<backends).map { latencyNanoseconds(request: request, backend: $0) }
            guard latencies.contains(where: { $0 > timeoutNanoseconds }) else {
                continue
            }
            late += latencies.count { $0 > timeoutNanoseconds }
        }
        return late
    }
}

extension Duration {
    /// Whole nanoseconds, for the workload's arithmetic.
    @usableFromInline
    var clampedNanosecondsForGateway: Int {
        let (seconds, attoseconds) = components
        return Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
    }
}

/// What a run of the gateway counted, and how it hands out requests and waits for the last.
///
/// Every implementation calls ``nextRequest()`` for the request to start, ``work(request:backend:)``
/// where a backend does its work, ``giveUp(_:)`` where the request's time limit passes, and
/// ``finish(_:succeeded:)`` when the request's caller gets its answer.
public final class GatewayRun: @unchecked Sendable {
    // @unchecked: `givenUp` points at atomics, allocated in `init` and freed in `deinit`.
    /// The workload.
    public let workload: GatewayWorkload
    private let issued = Atomic<Int>(0)
    private let finished = Atomic<Int>(0)
    private let timeouts = Atomic<Int>(0)
    private let workCalls = Atomic<Int>(0)
    private let workAfterGivingUp = Atomic<Int>(0)
    private let checksum = Atomic<Int>(0)
    /// One bit per request: set once its time limit passed.
    private let givenUp: UnsafeMutablePointer<Atomic<UInt64>>
    private let givenUpWords: Int
    private let done = DispatchSemaphore(value: 0)

    /// Creates a run of `workload`.
    public init(_ workload: GatewayWorkload) {
        self.workload = workload
        givenUpWords = (workload.requests + 63) / 64
        givenUp = .allocate(capacity: givenUpWords)
        for index in 0..<givenUpWords {
            (givenUp + index).initialize(to: Atomic(0))
        }
    }

    deinit {
        givenUp.deinitialize(count: givenUpWords)
        givenUp.deallocate()
    }

    /// The next request to start, or `nil` once every request has started.
    public func nextRequest() -> Int? {
        let request = issued.wrappingAdd(1, ordering: .relaxed).oldValue
        return request < workload.requests ? request : nil
    }

    /// A backend's work for `request`, which returns the backend's reply.
    ///
    /// A little arithmetic, counted, and counted apart if the request was given up already.
    public func work(request: Int, backend: Int) -> Int {
        workCalls.wrappingAdd(1, ordering: .relaxed)
        if isGivenUp(request) {
            workAfterGivingUp.wrappingAdd(1, ordering: .relaxed)
        }
        var value = request &* 2_654_435_761 &+ backend
        for _ in 0..<16 {
            value = (value ^ (value >> 13)) &* 0x5bd1_e995
        }
        return value
    }

    /// Records that `request`'s time limit passed and the gateway stopped waiting for it.
    public func giveUp(_ request: Int) {
        givenUp[request / 64].bitwiseOr(1 << UInt64(request % 64), ordering: .relaxed)
    }

    private func isGivenUp(_ request: Int) -> Bool {
        givenUp[request / 64].load(ordering: .relaxed) & (1 << UInt64(request % 64)) != 0
    }

    /// Records the answer to a request: the combined replies, or a timeout.
    public func finish(_ request: Int, reply: Int?) {
        if let reply {
            checksum.wrappingAdd(reply, ordering: .relaxed)
        } else {
            timeouts.wrappingAdd(1, ordering: .relaxed)
        }
        if finished.wrappingAdd(1, ordering: .acquiringAndReleasing).newValue == workload.requests {
            done.signal()
        }
    }

    /// Records how a request ended: with its combined replies, or given up when its time limit
    /// passed (a failure).
    public func end<Failure: Error>(_ request: Int, with result: Result<Int, Failure>) {
        switch result {
        case .success(let reply):
            finish(request, reply: reply)
        case .failure:
            giveUp(request)
            finish(request, reply: nil)
        }
    }

    /// Waits until every request has its answer.
    public func waitUntilFinished() {
        done.wait()
    }

    /// The counts of the run, once finished.
    public var counts: GatewayCounts {
        GatewayCounts(
            requests: finished.load(ordering: .acquiring), timeouts: timeouts.load(ordering: .relaxed),
            workCalls: workCalls.load(ordering: .relaxed),
            workAfterGivingUp: workAfterGivingUp.load(ordering: .relaxed))
    }
}

/// What a finished run counted.
public struct GatewayCounts: Sendable {
    /// Requests answered.
    public var requests: Int
    /// Requests answered with a timeout.
    public var timeouts: Int
    /// Backend work done in all.
    public var workCalls: Int
    /// Backend work done for requests already given up.
    public var workAfterGivingUp: Int

    /// Creates counts.
    public init(requests: Int, timeouts: Int, workCalls: Int, workAfterGivingUp: Int) {
        self.requests = requests
        self.timeouts = timeouts
        self.workCalls = workCalls
        self.workAfterGivingUp = workAfterGivingUp
    }
}

/// The reply combined from the backends' replies.
@inlinable
public func combineReplies(_ replies: [Int]) -> Int {
    replies.reduce(0, &+)
}
