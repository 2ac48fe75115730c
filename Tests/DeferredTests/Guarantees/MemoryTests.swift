import Deferred
import Dispatch
import Foundation
import TestSupport
import Testing

/// Guarantee 5: handlers and their captures are released right after they run, unfilled
/// futures that nobody references release their handlers, and derived futures form no cycles.
@Suite struct MemoryTests {
    /// A hundred handlers, the first inline and the others in chunks: each one's capture is
    /// gone by the time the next one runs.
    @Test func aHandlerIsReleasedRightAfterItRunsInPlace() {
        let live = LiveCount()
        let deferred = Deferred<Int>()
        let liveWhenRun = OrderRecorder(count: 101)
        for _ in 0..<100 {
            let tracked = LifetimeTracked(live)
            deferred.upon(.immediate) { _ in
                _ = tracked
                liveWhenRun.record(live.value)
            }
        }
        #expect(live.value == 100)
        deferred.fill(with: 1)
        #expect(liveWhenRun.order == Array((1...100).reversed()), "each capture was released before the next ran")
        #expect(live.value == 0, "every handler was released although the deferred lives on")
    }

    @Test func aHandlerIsReleasedRightAfterItRunsOnAQueue() {
        let live = LiveCount()
        let queue = DispatchQueue(label: "release")
        let deferred = Deferred<Int>()
        do {
            let tracked = LifetimeTracked(live)
            deferred.upon(queue) { _ in _ = tracked }
            deferred.upon(queue) { _ in _ = tracked }
        }
        deferred.fill(with: 1)
        queue.flush()
        #expect(live.value == 0)
    }

    @Test func weakReferencesCapturedByHandlersBecomeNil() {
        final class Screen: Sendable {}
        let deferred = Deferred<Int>()
        weak var weakScreen: Screen?
        do {
            let screen = Screen()
            weakScreen = screen
            deferred.upon(.immediate) { _ in _ = screen }
        }
        #expect(weakScreen != nil, "the pending handler keeps its capture")
        deferred.fill(with: 1)
        #expect(weakScreen == nil, "the capture went with the handler")
    }

    @Test func anUnfilledDeferredThatNobodyReferencesReleasesItsHandlers() {
        let live = LiveCount()
        do {
            let deferred = Deferred<Int>()
            let tracked = LifetimeTracked(live)
            for _ in 0..<10 {
                deferred.upon(.immediate) { _ in _ = tracked }
            }
        }
        #expect(live.value == 0)
    }

    @Test func derivedFuturesFormNoCyclesWithTheirSource() {
        let live = LiveCount()
        do {
            let source = Deferred<Int>()
            let other = Deferred<String>()
            let tracked = LifetimeTracked(live)
            let derived: [Future<Int>] = [
                source.map(upon: .immediate) { $0 },
                source.map(upon: DispatchQueue.global()) { $0 },
                source.andThen(upon: .immediate) { _ in other.lazy.map(\.count) },
                [source, source].allFilled().map(upon: .immediate) { $0[0] },
                [Future(source), Future(other.lazy.map(\.count))].firstFilled(),
                source.and(other).map(upon: .immediate) { $0.0 },
                source.lazy.map { $0 }.eraseToFuture(),
            ]
            for future in derived {
                future.upon(.immediate) { _ in _ = tracked }
            }
        }
        #expect(live.value == 0, "an unfilled graph that nobody references is released")
    }

    @Test func aFilledValueIsReleasedWithItsLastFuture() {
        let live = LiveCount()
        do {
            let deferred = Deferred<LifetimeTracked>()
            deferred.fill(with: LifetimeTracked(live))
            let mapped = deferred.map(upon: .immediate) { $0 }
            #expect(mapped.peek() != nil)
            #expect(live.value == 1)
        }
        #expect(live.value == 0)
    }
}
