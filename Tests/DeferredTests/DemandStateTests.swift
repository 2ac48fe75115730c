import Testing

@testable import Deferred

/// The pure half of an attempt's demand: units, pins, and the final states.
@Suite struct DemandStateTests {
    @Test func theLastReleaseCancelsUnlessPinned() {
        let two = DemandState.initial.adding()!.adding()!
        #expect(two.units == 2)
        let (one, cancelsFirst) = two.releasing()
        #expect(!cancelsFirst && one.units == 1)
        #expect(one.releasing() == (.cancelled, true))
        let pinned = one.pinning()
        #expect(pinned.isPinned)
        #expect(pinned.releasing().cancels == false, "a handler needs it for good")
    }

    @Test func finalStatesIgnoreDemand() {
        #expect(DemandState.cancelled.adding() == nil, "a dependent gets the cancellation")
        #expect(DemandState.settled.adding() == .settled)
        #expect(DemandState.settled.releasing() == (.settled, false))
        #expect(DemandState.cancelled.pinning() == .cancelled)
        #expect(DemandState.initial.finishing(cancelled: false) == (.settled, true))
        #expect(DemandState.settled.finishing(cancelled: true) == (.settled, false), "only the first finish counts")
        #expect(DemandState.initial.adding()!.finishing(cancelled: true) == (.cancelled, true))
    }
}
