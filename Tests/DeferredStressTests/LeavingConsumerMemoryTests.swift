import Deferred
import Synchronization
import TestSupport
import Testing

/// A pending source that a handler needs for good, whose producer counts its stops.
private final class MemoryPendingSource: Sendable {
    let writer = HeldWriter<Int, TestError>()
    let stopped = Counter()

    init() {
        writer.onCancel { [stopped] in stopped.increment() }
        writer.attempt.upon(.immediate) { _ in }
    }

    var attempt: Attempt<Int, TestError> { writer.attempt }
}

extension StressSuites {
    /// A consumer that leaves a pending source leaves nothing behind, measured: the run's memory
    /// cycles (200,000, or 1,000,000 in CI's full-size stage) of cancelled stages and of shared-run
    /// callers that give up, each in a child process, grow resident memory by less than 4 MB.
    @Suite struct LeavingConsumerMemoryTests {
        #if EXIT_TESTS  // a test in a child process; see testSwiftSettings in Package.swift
            /// How a consumer that leaves is made, for the memory tests.
            enum Leaver: String, Sendable {
                /// A `map` stage with a handler, cancelled.
                case cancelledStage
                /// A caller of a shared run with a handler, cancelled while another caller keeps the run.
                case sharedRunCaller
            }

            @Test(.timeLimit(.minutes(2)), .enabled(if: residentMemory() != nil))
            func cancelledStagesLeaveMemoryFlat() async {
                // Measured in a child process of its own, so that no other test's memory counts.
                let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
                    Self.measureLeaving(.cancelledStage)
                }
                Self.judge(.cancelledStage, String(decoding: result?.standardOutputContent ?? [], as: UTF8.self))
            }

            @Test(.timeLimit(.minutes(2)), .enabled(if: residentMemory() != nil))
            func sharedRunCallersThatGiveUpLeaveMemoryFlat() async {
                let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
                    Self.measureLeaving(.sharedRunCaller)
                }
                Self.judge(.sharedRunCaller, String(decoding: result?.standardOutputContent ?? [], as: UTF8.self))
            }

            /// In the child: makes the run's memory cycles of consumers that leave one pending source,
            /// and prints the growth of resident memory.
            static func measureLeaving(_ leaver: Leaver) -> Never {
                let cycles = TestSize.current.memoryCycles
                let source = MemoryPendingSource()
                let shared = SharedAttempts<Int, Int, TestError>()
                let keeper = shared.attempt(for: 0) { _ in source.attempt }
                keeper.upon(.immediate) { _ in }
                func leave() {
                    let consumer =
                        switch leaver {
                        case .cancelledStage: source.attempt.map(upon: .immediate) { $0 + 1 }
                        case .sharedRunCaller: shared.attempt(for: 0) { _ in source.attempt }
                        }
                    consumer.upon(.immediate) { _ in }
                    consumer.cancel()
                }
                for _ in 0..<5_000 { leave() }  // warm the caches up
                let before = residentMemory() ?? 0
                for _ in 0..<cycles { leave() }
                let growth = (residentMemory() ?? 0) - before
                print("growth: \(growth)")
                print("cycles: \(cycles)")
                print("stopped: \(source.stopped.value)")
                blackHole(keeper)
                endExitTest(passed: true)
            }

            /// In the parent: judges what the child printed.
            static func judge(_ leaver: Leaver, _ report: String, sourceLocation: SourceLocation = #_sourceLocation) {
                let growth = measuredFigure("growth", in: report)
                let cycles = measuredFigure("cycles", in: report) ?? 0
                progress(
                    "\(cycles) consumers that left (\(leaver.rawValue)) one pending source: resident memory grew by \(growth ?? -1) bytes"
                )
                // Kept, each would cost about 190 bytes (260 for a caller): 38 to 52 MB for 200,000.
                #expect(
                    growth.map { $0 < 4_000_000 } == true, "grew by \(growth ?? -1) bytes; the limit is 4 MB",
                    sourceLocation: sourceLocation)
                #expect(
                    measuredFigure("stopped", in: report) == 0, "the keeper still needs the source",
                    sourceLocation: sourceLocation)
            }
        #endif
    }
}
