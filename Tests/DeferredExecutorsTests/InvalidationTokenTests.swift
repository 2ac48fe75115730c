import DeferredExecutors
import Dispatch
import Foundation
import TestSupport
import Testing

@Suite struct InvalidationTokenTests {
    @Test func bodiesRunWhileTheTokenIsValid() {
        let token = InvalidationToken()
        let executor = ManualExecutor()
        let ran = Counter()
        Future(filledWith: 1).upon(token.validating(executor)) { _ in ran.increment() }
        executor.runUntilIdle()
        #expect(token.isValid)
        #expect(ran.value == 1)
    }

    @Test func bodiesPendingOnTheBaseAreSkippedOnceInvalidated() {
        let token = InvalidationToken()
        let executor = ManualExecutor()
        let ran = Counter()
        let live = LiveCount()
        do {
            let tracked = LifetimeTracked(live)
            Future(filledWith: 1).upon(token.validating(executor)) { _ in
                _ = tracked
                ran.increment()
            }
        }
        token.invalidate()
        executor.runUntilIdle()
        #expect(!token.isValid)
        #expect(ran.value == 0, "the late result does not land")
        #expect(live.value == 0, "and its captures are released")
    }

    @Test func bodiesSubmittedAfterInvalidationAreReleasedAtOnce() {
        let token = InvalidationToken()
        token.invalidate()
        let executor = ManualExecutor()
        let live = LiveCount()
        do {
            let tracked = LifetimeTracked(live)
            token.validating(executor).submit { _ = tracked }
        }
        #expect(!executor.hasPendingWork)
        #expect(live.value == 0)
    }

    /// Checking the token and starting the body were two steps, so on a concurrent executor a
    /// body could start after `invalidate()` returned.
    @Test func noBodyStartsAfterInvalidateReturnsOnAConcurrentExecutor() {
        let queue = DispatchQueue(label: "concurrent", attributes: .concurrent)
        let startedLate = Counter()
        var skipped = 0
        for _ in 0..<1_000 {
            let token = InvalidationToken()
            let executor = token.validating(queue)
            let returned = Deferred<Void>()
            let started = Counter()
            for _ in 0..<100 {
                executor.submit {
                    if returned.isFilled {
                        startedLate.increment()
                    }
                    started.increment()
                }
            }
            // Invalidate while bodies are starting on both cores.
            while started.value < 10 {}
            token.invalidate()
            returned.fill()
            queue.sync(flags: .barrier) {}
            skipped += 100 - started.value
        }
        #expect(skipped > 0, "some bodies were skipped")
        #expect(startedLate.value == 0, "\(startedLate.value) bodies started after invalidate() returned")
    }

    @Test func invalidateWaitsForABodyRunningOnAnotherThread() {
        let token = InvalidationToken()
        let entered = Deferred<Void>()
        let release = Deferred<Void>()
        let finished = Counter()
        token.validating(DispatchQueue.global()).submit {
            entered.fill()
            _ = release.value()
            finished.increment()
        }
        _ = entered.value()
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) { release.fill() }
        token.invalidate()
        #expect(finished.value == 1, "invalidate() returned only once the body finished")
    }

    /// A task started in a body inherits its task-local values; `invalidate()` in that task
    /// took the body, still running on another thread, for its own and did not wait.
    @Test func invalidateInATaskStartedByABodyWaitsForThatBody() async {
        var early = 0
        for _ in 0..<20 {
            let token = InvalidationToken()
            let bodyFinished = Counter()
            let sawBodyFinished = Deferred<Bool>()
            token.validating(DispatchQueue.global()).submit {
                let started = Deferred<Void>()
                Task {
                    started.fill()
                    token.invalidate()
                    sawBodyFinished.fill(with: bodyFinished.value == 1)
                }
                _ = started.value()
                Thread.sleep(forTimeInterval: 0.005)
                bodyFinished.increment()
            }
            // Awaited, so that this test holds no thread the task may need.
            if await sawBodyFinished.value != true {
                early += 1
            }
        }
        #expect(early == 0, "invalidate() returned before the body finished in \(early) of 20 rounds")
    }

    @Test func aBodyMayInvalidateItsOwnTokenEvenInsideAnotherTokensBody() {
        let outer = InvalidationToken()
        let inner = InvalidationToken()
        let ran = Counter()
        outer.validating(ImmediateExecutor.immediate).submit {
            inner.validating(ImmediateExecutor.immediate).submit {
                outer.invalidate()
                inner.invalidate()
                ran.increment()
            }
            outer.validating(ImmediateExecutor.immediate).submit { ran.increment() }
        }
        #expect(ran.value == 1)
        #expect(!outer.isValid && !inner.isValid)
    }

    @Test func theReusableCellShowsOnlyItsLatestRequest() {
        // A cell is reused: its first request's reply arrives after the second request's.
        final class Cell: Sendable {
            let shown = Deferred<String>()
            let token = Deferred<InvalidationToken>()
        }
        let main = ManualExecutor()
        let first = Deferred<String>()
        let second = Deferred<String>()
        let firstToken = InvalidationToken()
        let cell = Cell()
        first.upon(firstToken.validating(main)) { cell.shown.fill(with: $0) }
        firstToken.invalidate()  // reused for another row
        let secondToken = InvalidationToken()
        second.upon(secondToken.validating(main)) { cell.shown.fill(with: $0) }
        second.fill(with: "row 2")
        first.fill(with: "row 1")
        main.runUntilIdle()
        #expect(cell.shown.peek() == "row 2")
    }

    @Test func delayedBodiesAreCheckedWhenTheyComeDue() {
        let token = InvalidationToken()
        let clock = VirtualTimeExecutor()
        let ran = Counter()
        token.validating(clock).submit(after: .seconds(1)) { ran.increment() }
        token.invalidate()
        clock.advance(by: .seconds(1))
        #expect(ran.value == 0)
    }

    @Test func aValidatingExecutorWrapsAnyExecutor() {
        let token = InvalidationToken()
        let onQueue = Deferred<Bool>()
        Future(filledWith: 1).upon(token.validating(DispatchQueue.global())) { _ in onQueue.fill(with: true) }
        #expect(onQueue.value() == true)
    }
}

extension InvalidationTokenTests {
    /// Two bodies of one token that invalidate it at the same time both return: neither waits
    /// for a body that is itself invalidating (each waited for the other, for good).
    @Test func twoBodiesInvalidatingTheirTokenAtOnceBothReturn() {
        let first = ThreadExecutor(name: "invalidates 1")
        let second = ThreadExecutor(name: "invalidates 2")
        defer {
            first.shutdown()
            second.shutdown()
        }
        for _ in 0..<20 {
            let token = InvalidationToken()
            let arrived = Counter()
            let returned = Counter()
            let both = Deferred<Void>()
            for executor in [first, second] {
                token.validating(executor).submit {
                    arrived.increment()
                    while arrived.value < 2 {}  // Both bodies run before either invalidates.
                    token.invalidate()
                    if returned.increment() == 1 {
                        both.fill()
                    }
                }
            }
            #expect(both.wait(until: .now() + 10) != nil, "both calls returned")
            #expect(!token.isValid)
        }
    }

    /// A task that runs inside a body's nested run loop (on the body's thread) runs inside that
    /// body: its `invalidate()` does not wait for it, which could never finish first.
    @Test func aTaskRunningInsideABodysRunLoopDoesNotWaitForThatBody() {
        let executor = ThreadExecutor(name: "nested task")
        defer { executor.shutdown() }
        let token = InvalidationToken()
        let inBody = Deferred<Void>()
        let bodyReturned = Counter()
        let invalidated = Deferred<Bool>()
        token.validating(executor).submit {
            inBody.fill()
            // Runs the run loop until the task below has run inside it (or ten seconds pass).
            let deadline = Date(timeIntervalSinceNow: 10)
            while !invalidated.isFilled && Date() < deadline {
                _ = RunLoop.current.run(mode: .default, before: Date(timeIntervalSinceNow: 0.01))
            }
            bodyReturned.increment()
        }
        _ = inBody.wait(until: .now() + 10)
        Task(executorPreference: executor) {
            token.invalidate()
            invalidated.fill(with: bodyReturned.value == 0)
        }
        #expect(invalidated.wait(until: .now() + 20) == true, "returned inside the body")
    }
}

@Suite struct OwnerScopedCallbackTests {
    final class Screen: Sendable {
        let shown = Deferred<Int>()
    }

    @Test func theBodyGetsTheOwnerAndTheValue() {
        let screen = Screen()
        let deferred = Deferred<Int>()
        deferred.upon(.immediate, owner: screen) { screen, value in screen.shown.fill(with: value) }
        deferred.fill(with: 3)
        #expect(screen.shown.peek() == 3)
    }

    @Test func aPendingCallbackDoesNotKeepItsOwnerAlive() {
        let deferred = Deferred<Int>()
        let ran = Counter()
        weak var weakScreen: Screen?
        do {
            let screen = Screen()
            weakScreen = screen
            deferred.upon(.immediate, owner: screen) { _, _ in ran.increment() }
        }
        #expect(weakScreen == nil, "the service does not keep the screen alive")
        deferred.fill(with: 1)
        #expect(ran.value == 0, "the body is skipped once the owner is gone")
    }
}

@Suite struct CustomExecutorTests {
    /// A stand-in for a database context whose `perform` runs blocks on its private queue.
    final class DatabaseContext: Sendable {
        let queue = DispatchQueue(label: "database")
        let key = DispatchSpecificKey<Bool>()

        init() {
            queue.setSpecific(key: key, value: true)
        }

        func perform(_ block: @escaping @Sendable () -> Void) {
            queue.async(execute: block)
        }

        var isCurrent: Bool {
            DispatchQueue.getSpecific(key: key) == true
        }
    }

    @Test func aTypeWithAPerformMethodBecomesAnExecutorInThreeLines() {
        let context = DatabaseContext()
        let onContext = Future(filledWith: 1).map(upon: context) { _ in context.isCurrent }
        #expect(onContext.value() == true)
    }
}

extension CustomExecutorTests.DatabaseContext: Executor {
    func submit(_ body: @escaping @Sendable () -> Void) { perform(body) }
}
