import DeferredExecutors
import TestSupport
import Testing

/// An actor whose jobs run on a ThreadExecutor's thread.
private actor Ledger {
    let thread: ThreadExecutor
    var entries: [Int] = []

    init(thread: ThreadExecutor) {
        self.thread = thread
    }

    nonisolated var unownedExecutor: UnownedSerialExecutor {
        thread.asUnownedSerialExecutor()
    }

    /// Records `value`; returns whether it ran on the executor's thread.
    func record(_ value: Int) -> Bool {
        entries.append(value)
        return thread.isCurrent
    }
}

@Suite struct ThreadExecutorActorTests {
    @Test func anActorRunsOnTheExecutorsThread() async {
        let thread = ThreadExecutor(name: "ledger")
        let ledger = Ledger(thread: thread)
        #expect(await ledger.record(1))
        #expect(await ledger.entries == [1])
        #expect(!thread.isCurrent)
    }

    @Test func callbacksOnTheSameThreadShareTheActorsIsolation() async {
        let thread = ThreadExecutor(name: "ledger")
        let ledger = Ledger(thread: thread)
        _ = await ledger.record(1)
        let count = Deferred<Int>()
        // Callback-based code delivered to the same thread may enter the actor synchronously.
        Future(filledWith: 2).upon(thread) { value in
            ledger.assumeIsolated { ledger in
                ledger.entries.append(value)
                count.fill(with: ledger.entries.count)
            }
        }
        #expect(await count.value == 2)
        #expect(await ledger.entries == [1, 2])
    }

    @Test func actorJobsAndBodiesRunInTheOrderTheyWereSubmitted() async {
        let thread = ThreadExecutor()
        let ledger = Ledger(thread: thread)
        let recorder = OrderRecorder(count: 3)
        let done = Deferred<Void>()
        thread.submit { recorder.record(0) }
        _ = await ledger.record(1)
        recorder.record(1)
        thread.submit {
            recorder.record(2)
            done.fill()
        }
        await done.value
        #expect(recorder.order == [0, 1, 2])
    }

    @Test func aTaskMayPreferTheExecutor() async {
        let thread = ThreadExecutor(name: "worker")
        let ranOnThread = await Task(executorPreference: thread) { thread.isCurrent }.value
        #expect(ranOnThread)
        let withinGroup = await withTaskExecutorPreference(thread) {
            await Future(filledWith: 1).value == 1 && thread.isCurrent
        }
        #expect(withinGroup)
    }

    #if EXIT_TESTS  // a test in a child process; see testSwiftSettings in Package.swift
        @Test func aJobEnqueuedAfterShutdownStopsTheProgram() async {
            await #expect(processExitsWith: .failure) {
                let thread = ThreadExecutor(name: "stopped")
                await thread.shutdown().value
                _ = await Task(executorPreference: thread) { 1 }.value
            }
        }
    #endif
}
