import Deferred
import DeferredExecutors
import TestSupport
import Testing

/// The gateway with deadlines, on the virtual clock: each request calls three backends under its
/// own budget; each backend learns that budget from its writer, passes it on (here, as the
/// `grpc-timeout` header it would send) and stops by itself at the deadline; nothing runs past
/// it.
@Suite struct GatewayDeadlineTests {
    /// One backend call: its writer learns its deadline and stops the work by itself when it
    /// passes.
    final class Call: Sendable {
        let writer = HeldWriter<Int, any Error>()
        let clock: VirtualTimeExecutor
        /// The deadline the call learned, in nanoseconds after the clock's start (-1: none).
        let learned = Sighting()
        /// The header it would send with the deadline it learned (filled once).
        let header = Deferred<String>()
        /// When it finished, in nanoseconds after the clock's start.
        let finished = Sighting()
        /// Whether it stopped by itself at its deadline.
        let stoppedItself = Counter()

        init(latency: Duration, clock: VirtualTimeExecutor) {
            self.clock = clock
            writer.writer.onDeadlineChange(on: clock) { [self] deadline in
                guard let deadline else {
                    return
                }
                learned.record(
                    Int(
                        deadline.sinceStart.components.seconds * 1_000_000_000 + deadline.sinceStart.components
                            .attoseconds / 1_000_000_000))
                header.fill(with: TimeoutHeader(until: deadline, on: clock).description)
                clock.submit(after: clock.now.duration(to: deadline)) { [self] in
                    if writer.fail(with: DeadlineError()) {
                        stoppedItself.increment()
                        finish()
                    }
                }
            }
            writer.writer.onCancel(reporting: { [self] _ in finish() })
            clock.submit(after: latency) { [self] in
                if writer.succeed(with: 1) {
                    finish()
                }
            }
        }

        private func finish() {
            finished.record(
                Int(
                    clock.elapsed.components.seconds * 1_000_000_000 + clock.elapsed.components.attoseconds
                        / 1_000_000_000))
        }
    }

    @Test func eachRequestsBudgetReachesItsBackendsWhichStopByThemselvesAtTheDeadline() {
        let clock = VirtualTimeExecutor()
        var random = SplitMix(seed: TestSize.seed)
        struct Request {
            let deadline: Int
            let calls: [Call]
            let reply: Attempt<Int, any Error>
        }
        var requests: [Request] = []
        for _ in 0..<200 {
            let budget = Int.random(in: 10...200, using: &random)
            let calls = (0..<3).map { _ in
                Call(latency: .milliseconds(Int.random(in: 1...250, using: &random)), clock: clock)
            }
            let deadline = clock.now + .milliseconds(budget)
            let reply = calls.map { $0.writer.attempt }.allSucceeded()
                .map(upon: .immediate) { $0.reduce(0, +) }
                .deadline(at: deadline, on: clock)
            requests.append(Request(deadline: budget * 1_000_000, calls: calls, reply: reply))
            clock.advance(by: .zero)
        }
        clock.advance(by: .seconds(1))
        for request in requests {
            let slow = request.calls.filter { $0.finished.value >= request.deadline }
            for call in request.calls {
                #expect(call.learned.value == request.deadline, "each backend learned its request's deadline")
                #expect(call.header.peek().map { TimeoutHeader($0) != nil } == true)
                #expect(call.finished.count == 1, "each call finished once")
                #expect(call.finished.value <= request.deadline, "nothing runs past the deadline")
            }
            switch request.reply.peek() {
            case .success(let sum):
                #expect(sum == 3)
            case .failure(let error):
                #expect(error is DeadlineError)
                #expect(!slow.isEmpty && slow.allSatisfy { $0.finished.value == request.deadline })
                #expect(
                    slow.map(\.stoppedItself.value).reduce(0, +) == 1,
                    "the first stopped itself; the join let go of the others")
            case nil:
                Issue.record("a request is still pending after its deadline")
            }
        }
    }
}
