import Deferred
import Dispatch
import TestSupport
import Testing

extension StressSuites {
    /// Tracking: what it lists, and, under load, listing the pending futures while writers are
    /// made, filled and lost on other threads neither deadlocks nor loses a report.
    ///
    /// The tests that switch ``PendingFutures/isTracking`` on and off live here, in the
    /// serialized stress suites, so that one never switches it off under another.
    @Suite struct PendingFuturesRaceStressTests {
        @Test func trackingListsTheLiveUnfilledWritersOnly() {
            PendingFutures.isTracking = true
            let line: UInt = #line + 1
            let pending = Deferred<Int>()
            let filled = Deferred<Int>()
            var dropped: Deferred<Int>? = Deferred<Int>()
            filled.fill(with: 1)
            dropped = nil
            let mine = PendingFutures.all.filter {
                $0.file == "DeferredStressTests/PendingFuturesRaceStressTests.swift"
            }
            let description = String(reflecting: pending)
            PendingFutures.isTracking = false
            #expect(mine.map(\.line) == [line], "only the pending one, which something still holds")
            #expect(dropped == nil)
            #expect(
                description
                    == "Deferred(unfilled, made at DeferredStressTests/PendingFuturesRaceStressTests.swift:\(line))")
            pending.fill(with: 0)
        }

        /// A storage made where a recorded writer was released is not taken for it: it is
        /// neither reported under the dead writer's name nor described with its place.
        @Test func aStorageAtADeadWritersAddressIsNotTakenForIt() {
            PendingFutures.isTracking = true
            defer { PendingFutures.isTracking = false }
            var falseReports = 0
            var falsePlaces = 0
            for _ in 0..<200 {
                let before = PendingFutures.lostWriterCount
                do { _ = Deferred<(Int, Int, Int, Int, Int, Int)>() }  // recorded, no reader
                do {
                    let upstream = Deferred<Int>()
                    let stage = upstream.map(upon: .immediate) { $0 + 1 }  // may reuse its memory
                    stage.upon(.immediate) { _ in }
                    if String(reflecting: stage).contains("made at") {
                        falsePlaces += 1
                    }
                }
                // Only the upstream, lost with the stage registered on it, is reported.
                if PendingFutures.lostWriterCount - before != 1 {
                    falseReports += 1
                }
            }
            #expect(falseReports == 0)
            #expect(falsePlaces == 0)
        }

        @Test func listingWhileWritersAreLostOnOtherThreadsNeverDeadlocks() {
            PendingFutures.isTracking = true
            defer { PendingFutures.isTracking = false }
            let reportsBefore = PendingFutures.lostWriterCount
            let rounds = TestSize.current.raceRounds
            let done = Deferred<Void>()
            let lister = Deferred<Int>()
            DispatchQueue.global().async {
                var listed = 0
                while !done.isFilled {
                    listed += PendingFutures.all.count
                }
                lister.fill(with: listed)
            }
            DispatchQueue.concurrentPerform(iterations: 2) { side in
                for round in 0..<rounds {
                    let deferred = Deferred<Int>()
                    if round % 2 == side {
                        deferred.fill(with: round)
                    } else {
                        // Lost while a handler waits: its storage reports from its `deinit`,
                        // perhaps as the lister drops the last reference it took to read it.
                        deferred.upon(.immediate) { _ in }
                    }
                }
            }
            done.fill()
            #expect(lister.value(within: 60) != nil, "the lister deadlocked")
            #expect(PendingFutures.lostWriterCount - reportsBefore >= rounds, "a lost writer was not reported")
        }
    }
}
