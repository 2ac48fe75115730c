import Deferred
import Dispatch
import TestSupport
import Testing

@Suite struct DeferredTests {
    @Test func anUnfilledDeferredHasNoValue() {
        let deferred = Deferred<Int>()
        #expect(deferred.peek() == nil)
        #expect(deferred.isFilled == false)
    }

    @Test func fillMakesTheValueVisibleToEveryReader() {
        let deferred = Deferred<Int>()
        let copy = deferred
        #expect(deferred.fill(with: 42) == true)
        #expect(deferred.peek() == 42)
        #expect(copy.peek() == 42)
        #expect(copy.isFilled == true)
        #expect(Future(deferred).peek() == 42)
    }

    @Test func aSecondFillReturnsFalseAndKeepsTheFirstValue() {
        let deferred = Deferred<String>()
        #expect(deferred.fill(with: "first") == true)
        #expect(deferred.fill(with: "second") == false)
        #expect(deferred.peek() == "first")
    }

    @Test func aDeferredCreatedFilledCannotBeFilledAgain() {
        let deferred = Deferred(filledWith: 7)
        #expect(deferred.isFilled == true)
        #expect(deferred.peek() == 7)
        #expect(deferred.fill(with: 8) == false)
        #expect(deferred.peek() == 7)
    }

    @Test func aVoidDeferredIsFilledWithoutAValue() {
        let done = Deferred<Void>()
        let ran = Counter()
        done.upon(.immediate) { ran.increment() }
        #expect(done.fill())
        #expect(!done.fill())
        #expect(ran.value == 1)
    }

    @Test func aHandlerAddedBeforeTheFillRunsOnceAfterIt() {
        let deferred = Deferred<Int>()
        let received = Deferred<Int>()
        deferred.upon(.immediate) { received.fill(with: $0) }
        #expect(received.isFilled == false)
        deferred.fill(with: 3)
        #expect(received.peek() == 3)
    }

    @Test func aHandlerAddedAfterTheFillRunsAtOnceOnTheImmediateExecutor() {
        let deferred = Deferred(filledWith: 5)
        let ran = Counter()
        deferred.upon(.immediate) { _ in ran.increment() }
        #expect(ran.value == 1, "the immediate executor runs the handler before upon returns")
    }

    @Test func everyHandlerRunsExactlyOnce() {
        let deferred = Deferred<Int>()
        let ran = Counter()
        for _ in 0..<100 {
            deferred.upon(.immediate) { _ in ran.increment() }
        }
        deferred.fill(with: 1)
        deferred.fill(with: 2)
        for _ in 0..<100 {
            deferred.upon(.immediate) { _ in ran.increment() }
        }
        #expect(ran.value == 200)
    }

    @Test func uponRunsTheHandlerOnTheQueueItNames() {
        let queue = DispatchQueue(label: "upon-target")
        let key = DispatchSpecificKey<String>()
        queue.setSpecific(key: key, value: "upon-target")
        let deferred = Deferred<Int>()
        let onQueue = Deferred<Bool>()
        deferred.upon(queue) { _ in onQueue.fill(with: DispatchQueue.getSpecific(key: key) == "upon-target") }
        let afterFill = Deferred<Bool>()
        deferred.fill(with: 1)
        deferred.upon(queue) { _ in afterFill.fill(with: DispatchQueue.getSpecific(key: key) == "upon-target") }
        #expect(onQueue.value() == true)
        #expect(afterFill.value() == true)
    }

    @Test func uponWithoutAnExecutorRunsOnABackgroundQueue() {
        let deferred = Deferred<Int>()
        let received = Deferred<Int>()
        deferred.upon { received.fill(with: $0) }
        deferred.fill(with: 9)
        #expect(received.value() == 9)
    }

    @Test func waitReturnsTheValueFilledByAnotherThread() {
        let deferred = Deferred<Int>()
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.01) { deferred.fill(with: 11) }
        #expect(deferred.wait(until: .distantFuture) == 11)
    }

    @Test func waitReturnsAFilledValueEvenWithAPastDeadline() {
        #expect(Deferred(filledWith: 1).wait(until: .now() - 1) == 1)
        let deferred = Deferred<Int>()
        deferred.fill(with: 2)
        #expect(deferred.wait(until: .now() - 1) == 2)
    }

    @Test func waitWithAPastDeadlineReturnsNilAtOnce() {
        let deferred = Deferred<Int>()
        let started = DispatchTime.now()
        #expect(deferred.wait(until: .now() - 1) == nil)
        #expect(deferred.wait(until: .now()) == nil)
        // A wait that blocked at all would take at least a scheduler tick; allow a generous margin.
        #expect(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds < 500_000_000)
    }

    @Test func waitGivesUpAtTheDeadline() {
        let deferred = Deferred<Int>()
        let started = DispatchTime.now()
        #expect(deferred.wait(until: .now() + 0.05) == nil)
        #expect(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds >= 50_000_000)
        deferred.fill(with: 1)
        #expect(deferred.peek() == 1)
    }

    @Test func mustFillFillsAnUnfilledDeferred() {
        let deferred = Deferred<Int>()
        deferred.mustFill(with: 4)
        #expect(deferred.peek() == 4)
    }

    #if EXIT_TESTS  // a test in a child process; see testSwiftSettings in Package.swift
        @Test func mustFillTrapsOnASecondFillNamingTheTypeAndCallSite() async {
            let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
                let deferred = Deferred<Int>()
                deferred.mustFill(with: 1)
                deferred.mustFill(with: 2)
            }
            let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
            #expect(message.contains("Deferred<Int> was already filled"))
            #expect(message.contains("DeferredTests.swift"))
        }
    #endif
}
