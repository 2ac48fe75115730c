import Deferred
import Dispatch
import TestSupport
import Testing

/// Guarantee 17 at depth: a chain as deep as the test size says (20,000 quick, 1,000,000 in CI's
/// stack-safety stage; see ``TestSize``), mixing every kind of stage, below a writer that is lost,
/// is orphaned whole with a loop, for each failure family that cannot say "abandoned", on the
/// small stack of ``onDeepStack(_:size:_:)``.
@Suite(.skippedUnderThreadSanitizer) struct OrphanedAttemptStackSafetyTests {
    /// The kinds of the mixed chain: every kind that is not a recipe (recipes are made of these).
    static let kinds = AttemptKind.allCases.filter { !$0.isRecipe }

    @Test func aDeepMixedChainOfEveryKindBelowALostWriterIsOrphaned() async {
        let depth = TestSize.current.depth
        let (result, released) = await onDeepStack("attempt chain of every kind, orphaned") {
            let queue = DispatchQueue(label: "delays")
            var held: HeldWriter<Int, TestError>? = HeldWriter()
            var tail = held!.attempt
            for level in 0..<depth {
                tail = Self.kinds[level % Self.kinds.count].stage(after: tail, delayingOn: queue)
            }
            return Self.loseWriter(&held, below: tail)
        }
        #expect(result == nil)
        #expect(released, "the tail's handler was released")
    }

    @Test func aDeepMixedChainOfAPlainFailureTypeIsOrphaned() async {
        let (result, released) = await onDeepStack("attempt chain, plain failure, orphaned") {
            Self.mixedChain(OrphanedAttemptTests.Plain.self)
        }
        #expect(result == true)
        #expect(released, "the tail's handler was released")
    }

    @Test func aDeepMixedChainThatCannotFailIsOrphaned() async {
        let (result, released) = await onDeepStack("attempt chain, Never, orphaned") {
            Self.mixedChain(Never.self)
        }
        #expect(result == true)
        #expect(released, "the tail's handler was released")
    }

    /// A chain of `depth` stages cycling through ``OrphanedAttemptTests/Stage``, below a writer
    /// that is then lost: whether the tail has no result, and whether its handler was released.
    static func mixedChain<Failure: Error>(_: Failure.Type) -> (Bool, Bool) {
        let stages = OrphanedAttemptTests.Stage.allCases
        var held: HeldWriter<Int, Failure>? = HeldWriter()
        var tail = held!.attempt
        for level in 0..<TestSize.current.depth {
            tail = stages[level % stages.count].stage(after: tail)
        }
        let (result, released) = loseWriter(&held, below: tail)
        return (result == nil, released)
    }

    /// Adds a tracked handler to `tail`, loses the writer in `held`, and returns the tail's
    /// result and whether the handler was released.
    static func loseWriter<Failure: Error>(
        _ held: inout HeldWriter<Int, Failure>?, below tail: Attempt<Int, Failure>
    ) -> (Result<Int, Failure>?, Bool) {
        let live = LiveCount()
        let tracked = LifetimeTracked(live)
        tail.upon(.immediate) { _ in _ = tracked }
        _ = consume tracked
        held = nil
        return (tail.peek(), live.value == 0)
    }
}
