import Dispatch
import Synchronization
import TestSupport
import Testing

@testable import Deferred

/// Guarantee 8 stage by stage: cancelling an attempt cancels the attempts it waits on that
/// nothing else needs, whatever else hangs off the graph around them, and whatever kind of
/// attempt is cancelled.
@Suite struct AttemptDemandTests {
    /// What else needs part of the graph `root → top → middle → end` while `end` is cancelled.
    enum Neighbour: String, CaseIterable, CustomTestStringConvertible {
        /// Nothing: the producer itself is cancelled.
        case nothing
        /// Another transform of the root, with a handler.
        case siblingOfTheRoot
        /// A handler on the root.
        case handlerOnTheRoot
        /// A handler on `top`.
        case handlerOnTop
        /// A second transform of `top`, with a handler.
        case branchOfTop
        /// An `andThen` after `top`, with a handler.
        case ownerAfterTop
        /// Nothing, but the root has finished and `top`'s step waits on an executor.
        case finishedRoot

        var testDescription: String { rawValue }

        /// Whether the neighbour needs `top`'s step to run.
        var needsTop: Bool { [.handlerOnTop, .branchOfTop, .ownerAfterTop].contains(self) }

        /// Whether the neighbour keeps the producer from being cancelled.
        var needsRoot: Bool { self != .nothing }
    }

    @Test(arguments: Neighbour.allCases, AttemptKind.allCases)
    func aStageThatNothingNeedsNeverRuns(_ neighbour: Neighbour, end kind: AttemptKind) {
        let root = DeferredAttempt<Int, TestError>()
        let stopped = Counter()
        root.onCancel { stopped.increment() }
        let topRuns = Counter()
        let middleRuns = Counter()
        let neighbourSaw = Counter()
        let later = DispatchQueue(label: "top's step")
        later.suspend()
        if neighbour == .finishedRoot {
            root.succeed(with: 0)
        }
        let top = root.attempt.map(upon: later) { value in
            topRuns.increment()
            return value + 1
        }
        let middle = top.map(upon: .immediate) { value in
            middleRuns.increment()
            return value + 1
        }
        let end = kind.stage(after: middle, delayingOn: DispatchQueue(label: "delay"))
        switch neighbour {
        case .nothing, .finishedRoot:
            break
        case .siblingOfTheRoot:
            root.attempt.map(upon: .immediate) { $0 }.uponSuccess(.immediate) { _ in neighbourSaw.increment() }
        case .handlerOnTheRoot:
            root.attempt.uponSuccess(.immediate) { _ in neighbourSaw.increment() }
        case .handlerOnTop:
            top.uponSuccess(.immediate) { _ in neighbourSaw.increment() }
        case .branchOfTop:
            top.map(upon: .immediate) { $0 }.uponSuccess(.immediate) { _ in neighbourSaw.increment() }
        case .ownerAfterTop:
            top.andThen(upon: .immediate) { Attempt(succeededWith: $0) }.uponSuccess(.immediate) { _ in
                neighbourSaw.increment()
            }
        }

        end.cancel()
        if neighbour != .finishedRoot {
            #expect(root.succeed(with: 0) == neighbour.needsRoot, "the producer is cancelled only if nothing needs it")
        }
        later.resume()
        later.sync {}

        #expect(middleRuns.value == 0, "only the cancelled end needed the middle stage")
        #expect(topRuns.value == (neighbour.needsTop ? 1 : 0))
        #expect(stopped.value == (neighbour.needsRoot ? 0 : 1))
        #expect(neighbourSaw.value == (neighbour == .nothing || neighbour == .finishedRoot ? 0 : 1))
        #expect(middle.isCancelled && end.isCancelled)
        #expect(top.isCancelled != neighbour.needsTop)
    }

    /// What else needs the middle stage of `root → middle → end`.
    enum MiddleNeighbour: String, CaseIterable, CustomTestStringConvertible {
        case handler, branch, owner, join

        var testDescription: String { rawValue }
    }

    @Test(arguments: MiddleNeighbour.allCases, AttemptKind.allCases)
    func aStageThatSomethingElseNeedsStillRuns(_ neighbour: MiddleNeighbour, end kind: AttemptKind) {
        let root = DeferredAttempt<Int, TestError>()
        let middleRuns = Counter()
        let neighbourSaw = Counter()
        let middle = root.attempt.map(upon: .immediate) { value in
            middleRuns.increment()
            return value + 1
        }
        let end = kind.stage(after: middle, delayingOn: DispatchQueue(label: "delay"))
        switch neighbour {
        case .handler:
            middle.uponSuccess(.immediate) { _ in neighbourSaw.increment() }
        case .branch:
            middle.map(upon: .immediate) { $0 }.uponSuccess(.immediate) { _ in neighbourSaw.increment() }
        case .owner:
            middle.andThen(upon: .immediate) { Attempt(succeededWith: $0) }.uponSuccess(.immediate) { _ in
                neighbourSaw.increment()
            }
        case .join:
            [middle].allSucceeded().uponSuccess(.immediate) { _ in neighbourSaw.increment() }
        }
        end.cancel()
        #expect(root.succeed(with: 0) == true)
        #expect(middleRuns.value == 1)
        #expect(neighbourSaw.value == 1)
        #expect(middle.peek() == .success(1))
    }

    @Test func aLongPathStopsBelowTheDeepestStageStillNeeded() {
        let root = DeferredAttempt<Int, TestError>()
        let runs = (0..<6).map { _ in Counter() }
        var stages: [Attempt<Int, TestError>] = []
        var tail = root.attempt
        for index in 0..<6 {
            tail = tail.map(upon: .immediate) { value in
                runs[index].increment()
                return value + 1
            }
            stages.append(tail)
        }
        stages[1].uponSuccess(.immediate) { _ in }
        stages[3].uponSuccess(.immediate) { _ in }
        stages[5].cancel()
        #expect(root.succeed(with: 0) == true)
        #expect(runs.map(\.value) == [1, 1, 1, 1, 0, 0], "stage 4 runs for the handler on it, stage 5 for nothing")
    }

    /// A reader (`get()`, `wait`) holds a unit at its attempt's depth while it waits; taken here
    /// the way they take it, so that the test knows it is held before cancelling.
    @Test func aWaitingReaderKeepsTheStagesAboveIt() {
        let root = DeferredAttempt<Int, TestError>()
        let middleRuns = Counter()
        let endRuns = Counter()
        let middle = root.attempt.map(upon: .immediate) { value in
            middleRuns.increment()
            return value + 1
        }
        let end = middle.map(upon: .immediate) { value in
            endRuns.increment()
            return value + 1
        }
        let below = end.map(upon: .immediate) { $0 + 1 }
        guard end.node.takeUnit() else {
            Issue.record("the attempt was needed")
            return
        }
        let reader = DemandUnit(end.node)
        below.cancel()
        #expect(root.succeed(with: 0) == true)
        #expect(middleRuns.value == 1 && endRuns.value == 1, "the reader on the end needs it and what it waits on")
        #expect(end.peek() == .success(2))
        reader.release(givingBack: true)

        let other = DeferredAttempt<Int, TestError>()
        let stopped = Counter()
        other.onCancel { stopped.increment() }
        let top = other.attempt.map(upon: .immediate) { $0 + 1 }
        let lower = top.map(upon: .immediate) { $0 + 1 }
        guard top.node.takeUnit() else {
            Issue.record("the attempt was needed")
            return
        }
        let gaveUp = DemandUnit(top.node)
        lower.cancel()
        #expect(stopped.value == 0, "the reader still needs the producer")
        gaveUp.release()
        #expect(stopped.value == 1, "a reader that gives up leaves nothing needing it")
        #expect(top.isCancelled == true)
    }

    /// What is derived from a stage below a timeout that already fired.
    enum AfterTimeout: String, CaseIterable, CustomTestStringConvertible {
        case recover, mapError, delay, andThen, fallback

        var testDescription: String { rawValue }

        func stage(after attempt: Attempt<Int, TestError>) -> Attempt<Int, TestError> {
            switch self {
            case .recover: attempt.recover(upon: .immediate) { _ in 42 }
            case .mapError: attempt.mapError(upon: .immediate) { _ in .failed(42) }
            case .delay: attempt.delay(by: .zero, upon: StoppedClock())
            case .andThen: attempt.andThen(upon: .immediate) { Attempt(succeededWith: $0 + 1) }
            case .fallback: attempt.fallback(upon: .immediate) { _ in Attempt(failedWith: .failed(42)) }
            }
        }

        var expected: Result<Int, TestError> {
            switch self {
            case .recover: .success(42)
            case .mapError, .fallback: .failure(.failed(42))
            case .delay, .andThen: .failure(.timedOut)
            }
        }
    }

    @Test(arguments: AfterTimeout.allCases)
    func aStageBelowAFiredTimeoutGetsItsResult(_ kind: AfterTimeout) {
        let root = DeferredAttempt<Int, TestError>()
        let stopped = Counter()
        root.onCancel { stopped.increment() }
        let aboveRuns = Counter()
        let later = DispatchQueue(label: "above")
        later.suspend()
        root.attempt.uponFailure(.immediate) { _ in }  // keeps the root needed
        let above = root.attempt.map(upon: later) { value in
            aboveRuns.increment()
            return value
        }
        let limited = above.timeout(after: .zero, upon: StoppedClock(), failingWith: .timedOut)
        #expect(limited.peek() == .failure(.timedOut))
        let below = kind.stage(after: limited)
        #expect(root.succeed(with: 0) == true)
        later.resume()
        later.sync {}
        #expect(below.peek() == kind.expected, "its source's result, not a cancellation")
        #expect(aboveRuns.value == 0, "deriving from the timed-out stage does not make the stage above needed again")
        #expect(stopped.value == 0)
    }
}
