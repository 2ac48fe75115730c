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

/// A hub's side units by depth (``SideDemand``): exact answers, alone and under contention.
@Suite struct SideDemandTests {
    /// The depths from 1 to `upTo` at which `side` says units are held at that depth or deeper.
    static func answers(_ side: SideDemand, upTo deepest: Int) -> [Bool] {
        (1...deepest).map { side.holds(atLeast: $0) }
    }

    @Test func theDeepestHeldDepthAnswers() {
        let side = SideDemand()
        let none = Self.answers(side, upTo: 8)
        side.adjust(3, by: 1)
        side.adjust(7, by: 1)
        let both = Self.answers(side, upTo: 8)
        side.adjust(7, by: -1)
        let shallow = Self.answers(side, upTo: 8)
        side.adjust(3, by: -1)
        let gone = Self.answers(side, upTo: 8)
        #expect(none == Array(repeating: false, count: 8))
        #expect(both == [true, true, true, true, true, true, true, false])
        #expect(shallow == [true, true, true, false, false, false, false, false], "a released depth no longer counts")
        #expect(gone == Array(repeating: false, count: 8))
    }

    /// Depths in different leaves and levels of the tree, and beyond its last depth.
    @Test(arguments: [(5, 70), (63, 64), (4_095, 4_096), (200_000, 1_000_000), (1 << 24, (1 << 24) + 9)])
    func depthsFarApartAnswerExactly(_ shallow: Int, _ deep: Int) {
        let side = SideDemand()
        side.adjust(deep, by: 1)
        side.adjust(shallow, by: 1)
        #expect(side.holds(atLeast: shallow) && side.holds(atLeast: min(deep, (1 << 24) - 1)))
        side.adjust(deep, by: -1)
        #expect(side.holds(atLeast: shallow))
        #expect(!side.holds(atLeast: shallow + 1) || shallow >= (1 << 24) - 1)
        side.adjust(shallow, by: -1)
        #expect(!side.holds(atLeast: 1))
    }

    @Test func manyDepthsComeAndGoInAnyOrder() {
        let side = SideDemand()
        var model: [Int: Int] = [:]
        var mismatches = 0
        for _ in 0..<4_000 {
            let depth = [Int.random(in: 1...40), Int.random(in: 1...300_000)].randomElement()!
            let delta = (model[depth] ?? 0) > 0 && Bool.random() ? -1 : 1
            side.adjust(depth, by: delta)
            model[depth, default: 0] += delta
            let probe = [Int.random(in: 1...41), Int.random(in: 1...300_001)].randomElement()!
            if side.holds(atLeast: probe) != model.contains(where: { $0.key >= probe && $0.value > 0 }) {
                mismatches += 1
            }
        }
        #expect(mismatches == 0)
    }
}
