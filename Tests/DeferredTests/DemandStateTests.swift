import Testing

@testable import Deferred

/// The pure half of an attempt's demand: units, pins, the path unit, and the final states.
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

    @Test func thePathUnitIsCountedAndMarked() {
        let path = DemandState.initial.adding(path: true)!
        #expect(path.isPathHeld && path.units == 1)
        let withSide = path.adding()!
        let (released, cancels) = withSide.releasing(path: true)
        #expect(!cancels && !released.isPathHeld && released.units == 1, "a side unit still needs the attempt")
        #expect(released.releasing() == (.cancelled, true))
    }

    @Test func aSettledAttemptKeepsCountingForItsStages() {
        let (settled, finishes) = DemandState.initial.adding(path: true)!.finishing(cancelled: false)
        #expect(finishes && settled.isFinal && !settled.isCancelled)
        #expect(settled.isPathHeld, "stages still waiting to run are needed")
        let (released, cancels) = settled.releasing(path: true)
        #expect(!cancels && !released.isPathHeld && released.units == 0 && !released.isCancelled)
        #expect(released.adding()!.units == 1)
        #expect(released.finishing(cancelled: true) == (released, false), "only the first finish counts")
    }

    @Test func aCancellationIsFinal() {
        #expect(DemandState.cancelled.adding() == nil, "a dependent gets the cancellation")
        #expect(DemandState.cancelled.releasing() == (.cancelled, false))
        #expect(DemandState.cancelled.pinning() == .cancelled)
        #expect(!DemandState.cancelled.isPathHeld)
        #expect(DemandState.initial.adding()!.finishing(cancelled: true) == (.cancelled, true))
    }

    @Test func aReaderCancelsOnlyAfterADependentGaveUp() {
        let reader = DemandState.initial.adding()!
        #expect(reader.returning() == (.initial, false))
        let (gaveUp, _) = reader.adding()!.releasing()
        #expect(gaveUp.returning() == (.cancelled, true))
    }
}
