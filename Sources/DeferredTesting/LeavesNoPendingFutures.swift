import Deferred
public import Testing

/// A Swift Testing trait that fails a test which leaves futures pending: every `Deferred` and
/// `DeferredAttempt` the test makes, in its task, must be filled by the time the test returns.
///
/// ```swift
/// import DeferredTesting
/// import Testing
///
/// @Test(.leavesNoPendingFutures) func loadingAProfileAnswers() async throws {
///     let service = ProfileService()
///     _ = try await service.profile(id: 7).get()
/// }
/// ```
///
/// A writer left unfilled is reported as an issue of the test, at the test's `@Test` line, naming
/// the writer's type and where it was made (see `PendingFutures`), even if every copy of it was
/// dropped, followed by its pending chains: the stages derived from it and what waits at their
/// end. On a suite, it applies to each of the suite's tests. Futures made on other threads or
/// queues are not watched.
public struct LeavesNoPendingFutures: TestTrait, SuiteTrait, TestScoping {
    /// Creates the trait; `.leavesNoPendingFutures` reads better.
    public init() {}

    /// Applies to every test of a suite it is attached to.
    public var isRecursive: Bool { true }

    /// Runs the test, then records an issue for each future it left pending.
    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        guard !isSuiteScope(test, testCase) else {
            try await function()
            return
        }
        let (_, pending) = try await PendingFutures.madeDuring { try await function() }
        // At the test's own location, which a report can point to; the message names where the
        // writer was made.
        for future in pending {
            Issue.record(
                Comment(rawValue: "the test left a future pending: \(future)" + describe(future.chains)),
                sourceLocation: test.sourceLocation)
        }
    }
}

extension Trait where Self == LeavesNoPendingFutures {
    /// Fails the test if a `Deferred` or `DeferredAttempt` it made is not filled when it returns.
    public static var leavesNoPendingFutures: Self { LeavesNoPendingFutures() }
}

/// A test's pending chains, one a line, for an issue's message; empty if there are none.
internal func describe(_ chains: [PendingChain]) -> String {
    chains.map { "\n  " + $0.description }.joined()
}

/// Whether a trait's scope for `test` and `testCase` is a suite's own, not a test's: a recursive
/// trait then only runs it, since the suite's tests each get a scope of their own.
internal func isSuiteScope(_ test: Test, _ testCase: Test.Case?) -> Bool {
    testCase == nil && test.isSuite
}
