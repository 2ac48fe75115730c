import TestSupport
import Testing

@testable import Deferred

/// The pure half of the storage protocol: every decision, checked without threads.
@Suite struct StorageStateTests {
    @Test func aNewStorageHasNoValueAndNoHandlers() {
        let state = StorageState.initial
        #expect(state.isFilled == false)
        #expect(!state.isFillClaimed)
        #expect(!state.hasPendingHandlers)
        #expect(state.overflowHead == 0)
    }

    @Test func theFirstRegistrantClaimsTheInlineSlot() {
        let claimed = StorageState(rawValue: StorageState.firstClaimedBit)
        #expect(StorageState.initial.registration == .claimFirst(claimed))
        #expect(claimed.isFirstClaimed)
        #expect(!claimed.isFirstReady)
    }

    @Test func laterRegistrantsGoToTheChunks() {
        let claimed = StorageState(rawValue: StorageState.firstClaimedBit)
        #expect(claimed.registration == .pushOverflow)
        let ready = StorageState(rawValue: StorageState.firstClaimedBit | StorageState.firstReadyBit)
        #expect(ready.registration == .pushOverflow)
    }

    @Test func registrantsStoreHandlersWhileAFillIsWritingTheValue() {
        let claiming = StorageState(rawValue: StorageState.fillClaimedBit)
        #expect(
            claiming.registration
                == .claimFirst(StorageState(rawValue: claiming.rawValue | StorageState.firstClaimedBit)))
        let claimingWithFirst = StorageState(rawValue: StorageState.fillClaimedBit | StorageState.firstClaimedBit)
        #expect(claimingWithFirst.registration == .pushOverflow)
    }

    @Test func aPublishedStorageRunsNewHandlersAtOnce() {
        let published = StorageState.published
        #expect(published.isFilled == true)
        #expect(published.isFillClaimed)
        #expect(!published.hasPendingHandlers)
        #expect(published.registration == .runNow)
        // A fill sets the filled bit and leaves the rest: a registrant that finds it runs its
        // handler itself, whatever else the word holds.
        let filledWithHandlers = StorageState(
            rawValue: StorageState.firstClaimedBit | StorageState.firstReadyBit | StorageState.fillClaimedBit
                | StorageState.filledBit
        ).pushing(0x1000)
        #expect(filledWithHandlers.registration == .runNow)
        #expect(filledWithHandlers.firstHandlerRunner == .registrant)
        #expect(filledWithHandlers.overflowPush(0x2000) == .runNow)
        #expect(!filledWithHandlers.needsDetach, "the chunks of a filled storage are only freed")
    }

    @Test func pushingAChunkKeepsTheFlagsAndReplacesTheHead() {
        let ready = StorageState(rawValue: StorageState.firstClaimedBit | StorageState.firstReadyBit)
        let pushed = ready.pushing(0x1000)
        #expect(pushed.overflowHead == 0x1000)
        #expect(pushed.isFirstReady)
        #expect(pushed.isFirstClaimed)
        #expect(pushed.pushing(0x2000).overflowHead == 0x2000)
    }

    @Test func aFillOwesTheInlineHandlerOnlyOnceItIsReady() {
        let claimed = StorageState(rawValue: StorageState.firstClaimedBit)
        #expect(!claimed.hasPendingHandlers, "a claimed but unwritten handler belongs to its registrant")
        let ready = StorageState(rawValue: StorageState.firstClaimedBit | StorageState.firstReadyBit)
        #expect(ready.hasPendingHandlers)
        #expect(claimed.pushing(0x1000).hasPendingHandlers)
    }
}
