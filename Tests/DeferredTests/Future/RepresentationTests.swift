import TestSupport
import Testing

@testable import Deferred

/// Representation checks that the public API cannot observe directly.
@Suite struct RepresentationTests {
    @Test func wrappingAFutureOrDeferredSharesItsStorage() throws {
        let deferred = Deferred<Int>()
        guard case .storage(let original) = deferred.backing else {
            Issue.record("an unfilled deferred has storage")
            return
        }
        for wrapped in [
            Future(deferred), Future(Future(deferred)), Future(deferred.eraseToFuture()), deferred.eraseToFuture(),
        ] {
            guard case .storage(let storage) = wrapped.backing else {
                Issue.record("wrapping lost the storage")
                continue
            }
            #expect(storage === original)
        }
    }

    @Test func filledAndNeverFuturesNeedNoStorage() {
        guard case .filled(1) = Future(filledWith: 1).backing else {
            Issue.record("Future(filledWith:) should be stored inline")
            return
        }
        guard case .filled(2) = Deferred(filledWith: 2).backing else {
            Issue.record("Deferred(filledWith:) should be stored inline")
            return
        }
        guard case .never = Future<Int>.never.backing else {
            Issue.record("Future.never should need no storage")
            return
        }
    }

    @Test func derivedFuturesDoNotKeepTheirSourceAlive() {
        weak var weakSource: Storage<Int>?
        var derived: [Future<Int>] = []
        do {
            let source = Deferred<Int>()
            if case .storage(let storage) = source.backing {
                weakSource = storage
            }
            derived.append(source.map(upon: .immediate) { $0 })
            derived.append(source.andThen(upon: .immediate) { Future(filledWith: $0) })
            derived.append([source].allFilled().map(upon: .immediate) { $0[0] })
            derived.append([source].firstFilled())
            derived.append(source.and(source).map(upon: .immediate) { $0.0 })
        }
        #expect(weakSource == nil, "a derived future kept its source alive")
        #expect(derived.allSatisfy { !$0.isFilled })
    }

    @Test func cancelledWaitersAreRemovedFromTheFuture() async {
        let deferred = Deferred<Int>()
        for _ in 0..<TestSize.sanitized(2_000) {
            let task = Task { try await deferred.get() }
            task.cancel()
            _ = await task.result
        }
        let tasks = (0..<TestSize.sanitized(1_000)).map { _ in Task { try await deferred.get() } }
        try? await Task.sleep(for: .milliseconds(50))
        for task in tasks {
            task.cancel()
            _ = await task.result
        }
        guard case .storage(let storage) = deferred.backing, let waiters = storage.waiters() else {
            Issue.record("the deferred should have a waiter registry")
            return
        }
        // Compaction runs once waiters that gave up are half of all, so none remain.
        #expect(waiters.count == 0, "\(waiters.count) waiters are still registered")
        deferred.fill(with: 1)
    }
}
