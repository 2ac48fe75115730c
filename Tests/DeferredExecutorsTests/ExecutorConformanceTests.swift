import TestSupport
import Testing

/// The executor conformance suite (``ExecutorConformance``) over every kind of executor.
@Suite struct ExecutorConformanceTests {
    @Test(arguments: ExecutorKind.allCases)
    func eachBodyRunsExactlyOnce(_ kind: ExecutorKind) {
        ExecutorConformance.checkExactlyOnce(kind.make())
    }

    @Test(arguments: ExecutorKind.allCases.filter(\.isSerial))
    func aSerialExecutorRunsBodiesInTheOrderSubmitted(_ kind: ExecutorKind) {
        ExecutorConformance.checkOrder(kind.make())
    }

    @Test(arguments: ExecutorKind.allCases)
    func eachBodyIsReleasedOnceItRan(_ kind: ExecutorKind) {
        ExecutorConformance.checkRelease(kind.make())
    }

    @Test(arguments: ExecutorKind.allCases)
    func delayedBodiesRunOnceAndAreReleased(_ kind: ExecutorKind) {
        ExecutorConformance.checkDelayedBodies(kind.make())
    }

    @Test(arguments: ExecutorKind.allCases.filter { $0.makeStoppable() != nil })
    func afterAStopNoBodyRunsAndEveryBodyIsReleased(_ kind: ExecutorKind) throws {
        ExecutorConformance.checkStop(try #require(kind.makeStoppable()))
    }

    @Test(arguments: ExecutorKind.allCases)
    func invalidateFromATaskStartedInABodyWaitsForTheTokensOtherBodies(_ kind: ExecutorKind) async {
        await ExecutorConformance.checkInvalidateFromATaskStartedInABody(kind.make())
    }

    @Test(arguments: ExecutorKind.allCases.filter { $0.makeStoppable() != nil })
    func aDelayedBodyDueAtTheStopRunsOnlyWhereAcceptedBodiesRun(_ kind: ExecutorKind) throws {
        ExecutorConformance.checkStopWithADelayedBodyDue(try #require(kind.makeStoppable()))
    }

    @Test(arguments: ExecutorKind.allCases.filter { $0.makeStoppable() != nil })
    func aStopWhileADelayedBodyRunsTheRunLoopCompletes(_ kind: ExecutorKind) throws {
        ExecutorConformance.checkStopWhileADelayedBodyRunsTheRunLoop(try #require(kind.makeStoppable()))
    }
}
