import Deferred
import Foundation
import TestSupport
import Testing

extension StressSuites {
    /// Reflection over public objects that hold pending storages: `dump` (and any `Mirror` walk)
    /// reaches their handlers, whose first word must read as what it is (issue 54 once made it a
    /// type's metadata address typed as an object, and `dump` crashed).
    @Suite struct ReflectionAttackTests {
        #if EXIT_TESTS
            /// `dump` of a `SharedFutures` whose run in flight has an immediate handler.
            @Test func dumpingSharedFuturesWithAnImmediateHandlerPending() async {
                await #expect(processExitsWith: .success) {
                    let shared = SharedFutures<Int, Int>()
                    let source = Deferred<Int>()
                    let future = shared.future(for: 0) { _ in source }
                    future.upon(.immediate) { _ in }
                    var text = ""
                    dump(shared, to: &text)
                    source.fill(with: 1)
                    endExitTest(passed: text.contains("SharedFutures"))
                }
            }

            /// `dump` of a `SharedAttempts` whose run in flight has a cancel handler, and whose
            /// caller has an immediate handler.
            @Test func dumpingSharedAttemptsWithCancelHandlersPending() async {
                await #expect(processExitsWith: .success) {
                    let shared = SharedAttempts<Int, Int, TestError>()
                    let writer = HeldWriter<Int, TestError>()
                    writer.onCancel {}
                    let caller = shared.attempt(for: 0) { _ in writer.attempt }
                    caller.upon(.immediate) { _ in }
                    var text = ""
                    dump(shared, to: &text)
                    writer.succeed(with: 1)
                    endExitTest(passed: text.contains("SharedAttempts"))
                }
            }

            /// The same walk with the executor given through `any Executor` (a callback handler,
            /// which holds the executor itself): the control.
            @Test func dumpingSharedFuturesWithACallbackOnAQueuePending() async {
                await #expect(processExitsWith: .success) {
                    let shared = SharedFutures<Int, Int>()
                    let source = Deferred<Int>()
                    let future = shared.future(for: 0) { _ in source }
                    future.upon(DispatchQueue.global()) { _ in }
                    var text = ""
                    dump(shared, to: &text)
                    source.fill(with: 1)
                    endExitTest(passed: text.contains("SharedFutures"))
                }
            }
        #endif
    }
}
