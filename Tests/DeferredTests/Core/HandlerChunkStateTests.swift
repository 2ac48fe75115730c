import Testing

@testable import Deferred

/// The pure half of a handler chunk: claims, the ready handshake and the close, checked without
/// threads.
@Suite struct HandlerChunkStateTests {
    @Test func aNewChunkHoldsItsCreatorsHandlerReady() {
        let new = HandlerChunkState.holdingFirstSlot
        #expect(new.claims == 1)
        #expect(new.readySlots == 1)
        #expect(!new.isClosed)
        #expect(new.claimOutcome(capacity: 4) == .slot(1))
    }

    @Test func claimsHandOutTheSlotsInOrderUntilTheChunkIsFull() {
        var word = HandlerChunkState.holdingFirstSlot
        var outcomes: [HandlerChunkState.Claim] = []
        for _ in 0..<5 {
            outcomes.append(word.claimOutcome(capacity: 4))
            word.rawValue += HandlerChunkState.oneClaim
        }
        #expect(outcomes == [.slot(1), .slot(2), .slot(3), .full, .full])
        #expect(word.claims == 6, "a claim past the capacity is counted and gets nothing")
    }

    @Test func aClosedChunkSendsEveryRegistrantToRunItsHandler() {
        let closed = HandlerChunkState(
            rawValue: HandlerChunkState.holdingFirstSlot.rawValue | HandlerChunkState.closedBit)
        #expect(closed.claimOutcome(capacity: 4) == .runNow)
        #expect(closed.claimOutcome(capacity: 1) == .runNow)
        #expect(closed.readyHandlerRunner == .registrant)
    }

    @Test func aHandlerReadyBeforeTheCloseIsTheFills() {
        var word = HandlerChunkState.holdingFirstSlot
        word.rawValue += HandlerChunkState.oneClaim
        #expect(word.readyHandlerRunner == .fill)
        word.rawValue += HandlerChunkState.readyBit(1)
        #expect(word.readySlots == 0b11)
        word.rawValue += HandlerChunkState.closedBit
        #expect(word.isClosed)
        #expect(word.readySlots == 0b11, "closing keeps the ready bits the fill runs")
    }

    @Test func theWordHasRoomForEverySlotOfTheLargestChunk() {
        let all = HandlerChunkState(rawValue: HandlerChunkState.readyBit(HandlerChunkState.maximumCapacity - 1))
        #expect(all.readySlots != 0)
        #expect(!all.isClosed)
        #expect(all.claims == 0)
    }
}
