public import Deferred
import DeferredExecutors
import Dispatch
import Foundation
public import Testing

/// Every kind of executor the library ships or supports, for the guarantee suites that run
/// over all of them.
///
/// A new executor joins this list in the change that adds it.
public enum ExecutorKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case immediate, serialQueue, concurrentQueue, mainActor, operationQueue, thread, loop, runLoop, manual
    case virtualTime, invalidating, userWritten

    /// The case name, as the test log shows it.
    public var testDescription: String { rawValue }

    /// A ready executor of this kind: a fresh one where making one is cheap, a shared one where
    /// it owns a thread.
    public func make() -> ExecutorUnderTest {
        switch self {
        case .immediate:
            let clock = VirtualTimeExecutor()
            return ExecutorUnderTest(
                ImmediateExecutor(), scheduling: clock, pump: { clock.advance(by: .zero) },
                passTime: { clock.advance(by: .seconds(1)) })
        case .serialQueue:
            let queue = DispatchQueue(label: "guarantees.serial")
            return ExecutorUnderTest(queue, scheduling: queue)
        case .concurrentQueue:
            let queue = DispatchQueue(label: "guarantees.concurrent", attributes: .concurrent)
            return ExecutorUnderTest(queue, scheduling: queue)
        case .mainActor:
            return ExecutorUnderTest(MainActorExecutor.shared, scheduling: DispatchQueue.main)
        case .operationQueue:
            return ExecutorUnderTest(Self.sharedOperationQueue, scheduling: DispatchQueue.global())
        case .thread:
            return ExecutorUnderTest(Self.sharedThread, scheduling: Self.sharedThread)
        case .loop:
            let loop = Self.sharedLoops.next()
            return ExecutorUnderTest(loop, scheduling: loop)
        case .runLoop:
            return ExecutorUnderTest(Self.sharedRunLoop, scheduling: Self.sharedRunLoop)
        case .manual:
            let manual = ManualExecutor()
            let clock = VirtualTimeExecutor()
            return ExecutorUnderTest(
                manual, scheduling: clock,
                pump: {
                    _ = manual.runUntilIdle()
                    clock.advance(by: .zero)
                },
                passTime: {
                    _ = manual.runUntilIdle()
                    clock.advance(by: .seconds(1))
                })
        case .virtualTime:
            let clock = VirtualTimeExecutor()
            return ExecutorUnderTest(
                clock, scheduling: clock, pump: { clock.advance(by: .zero) },
                passTime: { clock.advance(by: .seconds(1)) })
        case .invalidating:
            let queue = DispatchQueue(label: "guarantees.invalidating")
            let token = InvalidationToken()
            return ExecutorUnderTest(token.validating(queue), scheduling: token.validating(queue))
        case .userWritten:
            return ExecutorUnderTest(CountingExecutor(), scheduling: DispatchQueue.global())
        }
    }

    /// Whether bodies submitted from one thread run one at a time, in the order submitted.
    public var isSerial: Bool {
        switch self {
        case .concurrentQueue, .operationQueue: false
        default: true
        }
    }

    /// A fresh executor of this kind with the way to stop it, for the kinds that can be stopped:
    /// a thread or a loop shuts down, and an invalidating executor's token is invalidated.
    public func makeStoppable() -> StoppableExecutor? {
        switch self {
        case .thread:
            let thread = ThreadExecutor(name: "conformance.thread")
            return StoppableExecutor(
                under: ExecutorUnderTest(thread, scheduling: thread), runsAcceptedBodies: true,
                stop: { _ = thread.shutdown().wait(until: .now() + 30) }, isStopped: { thread.isShutDown })
        case .loop:
            let loop = LoopExecutor(name: "conformance.loop")
            return StoppableExecutor(
                under: ExecutorUnderTest(loop, scheduling: loop), runsAcceptedBodies: true,
                stop: { _ = loop.shutdown().wait(until: .now() + 30) }, isStopped: { loop.isShutDown })
        case .invalidating:
            let queue = DispatchQueue(label: "conformance.invalidating")
            let token = InvalidationToken()
            return StoppableExecutor(
                under: ExecutorUnderTest(token.validating(queue), scheduling: token.validating(queue)),
                runsAcceptedBodies: false, stop: token.invalidate, isStopped: { !token.isValid })
        default:
            return nil
        }
    }

    /// One operation queue for every test: each would otherwise leave threads behind.
    private static let sharedOperationQueue: OperationQueue = {
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 2
        return queue
    }()

    /// One thread for every test, never shut down.
    private static let sharedThread = ThreadExecutor(name: "guarantees.thread")

    /// Two loops for every test, never shut down: each test takes the next.
    private static let sharedLoops = LoopGroup(loops: 2, name: "guarantees.loop")

    /// The thread whose run loop ``sharedRunLoop`` is, never shut down.
    private static let runLoopHost = ThreadExecutor(name: "guarantees.runloop")

    /// The run loop of ``runLoopHost``.
    private static let sharedRunLoop: RunLoopExecutor = {
        let executor = Deferred<RunLoopExecutor>()
        runLoopHost.submit { executor.fill(with: .current()) }
        return executor.wait(until: .distantFuture)!
    }()
}

/// An executor that can be stopped, and what stopping does to the bodies it already accepted.
public struct StoppableExecutor: Sendable {
    /// The executor.
    public let under: ExecutorUnderTest

    /// Whether bodies accepted before the stop still run (a thread's shutdown) or are skipped
    /// (an invalidated token).
    public let runsAcceptedBodies: Bool

    /// Stops it; returns once no accepted body is left to start, when the kind promises that.
    public let stop: @Sendable () -> Void

    /// Whether the stop has taken effect (new bodies are refused), even if it has not returned.
    public let isStopped: @Sendable () -> Bool
}

/// An executor under test, with the scheduling executor that `delay` and `timeout` use beside
/// it (itself when it can schedule), and how to make its pending work run.
public struct ExecutorUnderTest: Sendable {
    /// Where the combinators' steps and the handlers run.
    public let executor: any Executor

    /// Where delays and time limits are measured.
    public let scheduling: any SchedulingExecutor

    /// Runs what is pending on executors that run only when told to (a manual or virtual-time
    /// executor); `nil` for those that run on their own.
    private let pump: (@Sendable () -> Void)?

    /// Moves a virtual clock on by a second, running what comes due; `nil` for real clocks.
    private let passTime: (@Sendable () -> Void)?

    init(
        _ executor: any Executor, scheduling: any SchedulingExecutor, pump: (@Sendable () -> Void)? = nil,
        passTime: (@Sendable () -> Void)? = nil
    ) {
        self.executor = executor
        self.scheduling = scheduling
        self.pump = pump
        self.passTime = passTime ?? pump
    }

    /// Lets time pass, on a virtual clock too, until `done` holds, for at most `limit`; returns
    /// whether it holds.
    public func settleAsTimePasses(within limit: Duration = .seconds(30), until done: () -> Bool) -> Bool {
        let deadline = ContinuousClock.now + limit
        while !done() {
            guard ContinuousClock.now < deadline else {
                return false
            }
            passTime?()
            Thread.sleep(forTimeInterval: 0.000_2)
        }
        return true
    }

    /// Lets pending work run until `done` holds, for at most `limit`; returns whether it holds.
    @discardableResult
    public func settle(within limit: Duration = .seconds(120), until done: () -> Bool) -> Bool {
        let deadline = ContinuousClock.now + limit
        while !done() {
            guard ContinuousClock.now < deadline else {
                return false
            }
            if let pump {
                pump()
                if done() {
                    return true
                }
            }
            Thread.sleep(forTimeInterval: 0.000_2)
        }
        return true
    }

    /// Lets pending work run until `done` holds, for at most `limit`, suspending rather than
    /// blocking between looks, so that tasks the work starts find a thread; returns whether it
    /// holds.
    public func settleSuspending(within limit: Duration = .seconds(120), until done: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while !done() {
            guard ContinuousClock.now < deadline else {
                return false
            }
            pump?()
            try? await Task.sleep(for: .microseconds(200))
        }
        return true
    }

    /// Lets pending work run for a while, so that anything that would run twice or late does.
    public func idle() {
        _ = settle(within: .milliseconds(20)) { false }
    }
}
