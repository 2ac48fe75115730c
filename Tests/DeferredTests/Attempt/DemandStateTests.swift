import Testing

@testable import Deferred

/// The pure half of an attempt's demand: units, pins, and how demand ends.
@Suite struct DemandStateTests {
    @Test func theLastReleaseStopsUnlessPinned() {
        let two = DemandState.initial.taking()!.taking()!
        #expect(two.units == 2)
        let (one, stopsFirst) = two.releasing()
        #expect(!stopsFirst && one.units == 1 && one.has(DemandState.givenUp))
        let (none, stops) = one.releasing()
        #expect(stops && none.isStopped && none.isFinal && none.units == 0)
        let pinned = one.pinning()
        #expect(pinned.has(DemandState.pinned))
        #expect(pinned.releasing().stops == false, "a handler needs it for good")
    }

    @Test func aReaderThatGivesBackStopsOnlyWhatSomeoneGaveUp() {
        let reader = DemandState.initial.taking()!
        let (left, stops) = reader.givingBack()
        #expect(!stops && left.units == 0 && !left.isFinal, "a wait that timed out does not say the work is unwanted")
        let withOther = reader.taking()!.releasing().next
        let (after, stopsAfter) = withOther.givingBack()
        #expect(stopsAfter && after.isStopped, "another consumer gave up while the reader waited")
    }

    @Test func demandEndsOnceByWhicheverComesFirst() {
        let held = DemandState.initial.taking()!
        let (settled, settles) = held.settling(cancelled: false)
        #expect(settles && settled.isFinal && !settled.isStopped)
        #expect(settled.taking() == nil, "a consumer that comes later holds nothing")
        #expect(settled.releasing() == (settled, false))
        #expect(settled.cancelling() == (DemandState(rawValue: settled.rawValue | DemandState.cancelled), false))
        #expect(settled.pinning() == settled)

        let (stopped, stops) = held.cancelling()
        #expect(stops && stopped.isStopped && stopped.has(DemandState.cancelled))
        let (decided, settlesAfterStop) = stopped.settling(cancelled: false)
        #expect(!settlesAfterStop && !decided.has(DemandState.settled), "a decision after a stop is a cancellation")
        #expect(stopped.cancelling().stops == false)
    }

    @Test func aCancellationMarksTheResult() {
        let (settled, _) = DemandState.initial.settling(cancelled: true)
        #expect(settled.has(DemandState.cancelled | DemandState.decidedCancelled))
        let decided = DemandState.initial.cancelling().next.decidingCancelled()
        #expect(decided.has(DemandState.decidedCancelled) && decided.isStopped)
    }

    @Test func aFinishedAttemptHasNoDemand() {
        #expect(DemandState.finished.isFinal && DemandState.finished.taking() == nil)
        #expect(!DemandState.initial.isFinal && DemandState.initial.units == 0)
    }
}
