import Deferred
public import Testing

/// A Swift Testing trait that stops a test which runs longer than a time limit, and records an
/// issue with the dump of every future the test made that is still pending.
///
/// ```swift
/// import DeferredTesting
/// import Testing
///
/// @Test(.reportsStuckFutures(after: .seconds(5))) func loadingAProfileAnswers() async throws {
///     let service = ProfileService()
///     _ = try await service.profile(id: 7).get()
/// }
/// ```
///
/// When the limit passes, the issue names each `Deferred` and `DeferredAttempt` the test made,
/// in its task, that is still unfilled, with its chains (what it waits on and who waits for it;
/// see `PendingFutures/dump()`), and the test's task is cancelled: `get()` on a future or an
/// attempt throws at once, so the test ends instead of hanging. A thread blocked in `wait`
/// cannot be cancelled: the issue is recorded all the same, and the test goes on waiting. On a
/// suite, it applies to each of the suite's tests.
public struct ReportsStuckFutures: TestTrait, SuiteTrait, TestScoping {
    /// How long a test may run.
    public let limit: Duration

    /// Creates the trait; `.reportsStuckFutures(after:)` reads better.
    ///
    /// - Parameter limit: How long a test may run.
    public init(after limit: Duration) {
        self.limit = limit
    }

    /// Applies to every test of a suite it is attached to.
    public var isRecursive: Bool { true }

    /// Runs the test; if it runs longer than ``limit``, records an issue with what the test
    /// left pending and cancels the test's task.
    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        guard !isSuiteScope(test, testCase) else {
            try await function()
            return
        }
        let limit = self.limit
        let location = test.sourceLocation
        _ = try await PendingFutures.madeDuring {
            // The group ends before this returns: `function` does not outlive the call.
            try await withoutActuallyEscaping(function) { function in
                try await withThrowingTaskGroup(of: Bool.self) { group in
                    group.addTask {
                        try await function()
                        return true
                    }
                    group.addTask {
                        try await Task.sleep(for: limit)  // Cancelled when the test ends first.
                        let pending = PendingFutures.pendingInScope
                        let list = pending.map { "\n- \($0)" + describe($0.chains) }.joined()
                        Issue.record(
                            Comment(
                                rawValue:
                                    "the test ran longer than \(limit); it left \(pending.count) future(s) pending"
                                    + list),
                            sourceLocation: location)
                        return false
                    }
                    var stuck = false
                    do {
                        while let testEnded = try await group.next() {
                            group.cancelAll()  // The test ended: stop the clock; or the limit passed: stop the test.
                            if testEnded {
                                return
                            }
                            stuck = true
                        }
                    } catch is CancellationError where stuck {
                        // The cancellation the trait asked for, already reported.
                    }
                }
            }
        }
    }
}

extension Trait where Self == ReportsStuckFutures {
    /// Stops a test that runs longer than `limit`, recording an issue with the futures it left
    /// pending and their chains.
    ///
    /// - Parameter limit: How long a test may run.
    /// - Returns: The trait.
    public static func reportsStuckFutures(after limit: Duration) -> Self {
        ReportsStuckFutures(after: limit)
    }
}
