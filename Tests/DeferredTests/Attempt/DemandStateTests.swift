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

    @Test func aFreshPathUnitOutlivesTheReleaseOfTheOldOne() {
        // A stage released its path unit while the stage below took a fresh one: both overlap
        // for a moment, and the release must not take the new one's with it.
        let two = DemandState.initial.adding(path: true)!.adding(path: true)!
        let (one, cancels) = two.releasing(path: true)
        #expect(!cancels && one.isPathHeld && one.units == 1)
        #expect(!one.releasing(path: true).state.isPathHeld)
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

/// The pure half of a hub's side units.
@Suite struct SideCountsTests {
    /// The depths from 1 to `upTo` at which `counts` says units are held at that depth or deeper.
    static func answers(_ counts: inout SideCounts, upTo deepest: Int) -> [Bool] {
        (1...deepest).map { counts.holds(atLeast: $0) }
    }

    @Test func theDeepestHeldDepthAnswers() {
        var counts = SideCounts()
        let none = Self.answers(&counts, upTo: 8)
        counts.adjust(3, by: 1)
        counts.adjust(7, by: 1)
        let both = Self.answers(&counts, upTo: 8)
        counts.adjust(7, by: -1)
        let shallow = Self.answers(&counts, upTo: 8)
        counts.adjust(3, by: -1)
        let gone = Self.answers(&counts, upTo: 8)
        #expect(none == Array(repeating: false, count: 8))
        #expect(both == [true, true, true, true, true, true, true, false])
        #expect(shallow == [true, true, true, false, false, false, false, false], "a released depth no longer counts")
        #expect(gone == Array(repeating: false, count: 8))
        #expect(counts.entries.isEmpty && counts.deepest.isEmpty, "nothing is kept once every unit is gone")
    }

    @Test func aCountThatDipsBelowZeroHoldsNothing() {
        var counts = SideCounts()
        counts.adjust(5, by: -1)
        let dipped = counts.holds(atLeast: 1)
        counts.adjust(5, by: 1)
        let back = counts.holds(atLeast: 1)
        #expect(!dipped && !back)
        #expect(counts.entries.isEmpty)
    }

    @Test func manyDepthsComeAndGoInAnyOrder() {
        var counts = SideCounts()
        var model: [Int: Int] = [:]
        var mismatches = 0
        for _ in 0..<2_000 {
            let depth = Int.random(in: 1...40)
            let delta = (model[depth] ?? 0) > 0 && Bool.random() ? -1 : 1
            counts.adjust(depth, by: delta)
            model[depth, default: 0] += delta
            let probe = Int.random(in: 1...41)
            if counts.holds(atLeast: probe) != model.contains(where: { $0.key >= probe && $0.value > 0 }) {
                mismatches += 1
            }
        }
        #expect(mismatches == 0)
    }
}
