import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import TestSupport
import Testing

extension StressSuites {
    /// What happens when the library is used wrongly: each misuse either has a defined, harmless
    /// result or stops the program with a message that says what went wrong.
    @Suite struct MisuseTests {
        // MARK: Waiting on the executor that must fill the value

        #if DEBUG && EXIT_TESTS  // a debug-build check, seen from a child process
            @Test func waitingOnAThreadExecutorForAMapOnItTraps() async {
                let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
                    let executor = ThreadExecutor(name: "waits for itself")
                    let source = Deferred<Int>()
                    let doubled = source.map(upon: executor) { $0 * 2 }
                    executor.submit {
                        source.fill(with: 1)
                        _ = doubled.wait(until: .distantFuture)
                    }
                    try? await Task.sleep(for: .seconds(60))
                }
                let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
                #expect(message.contains("wait(until:) on a future of Int can never return its value"))
                #expect(message.contains("a map on ThreadExecutor computes it"))
            }
        #endif

        #if EXIT_TESTS  // a test in a child process; CI runs this suite in a release build too
            /// A job enqueued on a thread executor after its shutdown stops the program with a
            /// message naming the executor, in release builds too (a `precondition`'s message is
            /// removed there, leaving a bare SIGILL).
            @Test func aJobEnqueuedAfterShutdownStopsTheProgramNamingTheExecutorInEveryBuild() async {
                let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
                    let executor = ThreadExecutor(name: "shut down early")
                    await executor.shutdown().value
                    Task(executorPreference: executor) {}
                    try? await Task.sleep(for: .seconds(60))
                }
                let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
                #expect(message.contains("a job was enqueued on ThreadExecutor \"shut down early\" after shutdown()"))
            }
        #endif

        #if EXIT_TESTS  // a test in a child process, where no other test makes futures
            /// While futures are tracked, a `Deferred` released unfilled while a handler waits
            /// is reported with its type and place, and stops the program if asked to.
            @Test(arguments: [false, true])
            func aLostDeferredIsReportedOrStopsTheProgram(trapping: Bool) async {
                let result = await #expect(
                    processExitsWith: trapping ? .failure : .success, observing: [\.standardOutputContent]
                ) { [trapping] in
                    PendingFutures.isTracking = true
                    PendingFutures.trapsOnLostWriters = trapping
                    do {
                        let forgotten = Deferred<[String]>()
                        forgotten.upon(.immediate) { _ in }
                    }
                    let typed = DeferredAttempt<Int, TestError>()
                    typed.attempt.upon(.immediate) { _ in }
                    _ = consume typed
                    endExitTest(passed: PendingFutures.lostWriterCount == 2)
                }
                let message = String(decoding: result?.standardOutputContent ?? [], as: UTF8.self)
                if !trapping {
                    #expect(
                        message.contains(
                            "Deferred: Deferred<Array<String>> made at DeferredStressTests/MisuseTests.swift:"))
                    #expect(
                        message.contains(
                            "was released unfilled while handlers or derived futures were registered on it"))
                    #expect(
                        message.contains(
                            "DeferredAttempt<Int, TestError> made at DeferredStressTests/MisuseTests.swift:"))
                    #expect(message.contains("lost its writer unfinished"))
                }
            }
        #endif

        #if EXIT_TESTS  // a test in a child process; CI runs this suite in a release build too
            /// A retry that may not start the work even once is a mistake in the call, stopped
            /// with a message in every build.
            @Test func aRetryOfNoAttemptsStopsTheProgramInEveryBuild() async {
                let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
                    _ = Attempt<Int, any Error>.retry(attempts: 0, upon: DispatchQueue.global()) {
                        Attempt(succeededWith: 1)
                    }
                }
                let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
                #expect(
                    message.contains(
                        "Attempt.retry(attempts: 0): attempts counts every start of the work and must be at least 1"))
            }
        #endif

        /// The main queue is recognised as blocked only on the main queue itself. (An exit test
        /// cannot show the trap on the main queue: nothing drains it in the child process.)
        @Test func theMainQueueKnowsWhenTheCallerBlocksIt() async {
            #expect(await MainActor.run { DispatchQueue.main.isBlockedByCaller })
            #expect(!DispatchQueue.main.isBlockedByCaller)
            let serial = DispatchQueue(label: "not main")
            #expect(!serial.sync { serial.isBlockedByCaller })
            #expect(!serial.sync { DispatchQueue.main.isBlockedByCaller })
        }

        @Test func waitingOnAnExecutorForAMapThatAlreadyRanThereReturnsTheValue() async {
            let executor = ThreadExecutor(name: "already mapped")
            let source = Deferred<Int>()
            let doubled = source.map(upon: executor) { $0 * 2 }
            source.fill(with: 4)  // queues the transform on the executor, ahead of the wait below
            let seen = Deferred<Int?>()
            executor.submit { seen.fill(with: doubled.wait(until: .distantFuture)) }
            #expect(await seen.value == 8)
            await executor.shutdown().value
        }

        @Test func waitingOnAConcurrentQueueForAMapOnItIsNotMistakenForADeadlock() async {
            let source = Deferred<Int>()
            let doubled = source.map(upon: .global()) { $0 * 2 }
            let seen = Deferred<Int?>()
            DispatchQueue.global().async { seen.fill(with: doubled.wait(until: .now() + 60)) }
            source.fill(with: 5)
            #expect(await seen.value == 10)
        }

        // MARK: Unusual values

        @Test func aVeryLargeValueArrivesWholeEverywhere() async {
            // 4 KiB stored inline in the value, and 8 MB behind an array.
            struct Block: Sendable {
                var words = InlineArray<512, UInt64>(repeating: 0)

                static var patterned: Block {
                    var block = Block()
                    for index in block.words.indices {
                        block.words[index] = UInt64(index) &* 0x9E37_79B9
                    }
                    return block
                }

                var isIntact: Bool {
                    words.indices.allSatisfy { words[$0] == UInt64($0) &* 0x9E37_79B9 }
                }
            }
            let deferred = Deferred<Block>()
            let checked = deferred.map(upon: DispatchQueue.global()) { $0.isIntact }
            let big = Deferred<[UInt8]>()
            let sum = big.map(upon: .immediate) { $0.reduce(0) { $0 &+ Int($1) } }
            DispatchQueue.global().async {
                deferred.fill(with: .patterned)
                big.fill(with: [UInt8](repeating: 3, count: 8_000_000))
            }
            #expect(await checked.value)
            #expect(await deferred.value.isIntact)
            #expect(deferred.peek()?.isIntact == true)
            #expect(await sum.value == 24_000_000)
        }

        @Test func voidFuturesSayOnlyWhenTheyAreDone() async {
            let first = Deferred<Void>()
            let second = Deferred<Void>()
            let both = first.and(second)
            let all = [first, second].allFilled()
            let counted = all.map(upon: .immediate) { $0.count }
            #expect(first.fill())
            #expect(!first.fill(), "a Void future is filled once too")
            #expect(both.isFilled == false)
            second.fill()
            _ = await both.value
            #expect(await counted.value == 2)
        }

        @Test func aClassValueIsSharedNotCopiedAndReleasedWithTheLastFuture() async {
            final class Model: Sendable {}
            weak var released: Model?
            do {
                let model = Model()
                released = model
                let deferred = Deferred<Model>()
                let identity = deferred.map(upon: DispatchQueue.global()) { $0 === model }
                deferred.fill(with: model)
                #expect(deferred.peek() === model)
                #expect(await identity.value)
                #expect(await deferred.lazy.map { $0 }.value === model)
            }
            // The transform's captures are released right after it runs, on the queue's thread,
            // which may be just after this task resumed with its result.
            for _ in 0..<500 where released != nil {
                try? await Task.sleep(for: .milliseconds(2))
            }
            #expect(released == nil)
        }

        @Test func aFutureOfAFutureIsFilledByTheOuterFillAndFlattenedByAndThen() async {
            let outer = Deferred<Future<Int>>()
            let inner = Deferred<Int>()
            let flattened = outer.andThen(upon: .immediate) { $0 }
            outer.fill(with: Future(inner))
            #expect(outer.isFilled == true, "the outer future holds a future, filled or not")
            #expect(outer.peek()?.isFilled == false)
            #expect(flattened.isFilled == false)
            inner.fill(with: 6)
            #expect(flattened.peek() == 6)
            #expect(await outer.value.value == 6)
        }
    }
}
