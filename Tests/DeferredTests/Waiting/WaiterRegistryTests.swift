import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Deferred

/// Waiters that give up (blocking waits that time out, cancelled `get()`s) leave the storage's
/// registry, at a cost linear in the live waiters, and never miss a value that arrives.
@Suite struct WaiterRegistryTests {
    @Test func timedOutWaitsLeaveNothingRegistered() throws {
        let deferred = Deferred<Int>()
        // Long enough past the poll that the waits sleep in the registry, even under a
        // sanitizer (a wait whose deadline passes while it polls never registers).
        for _ in 0..<1_000 {
            #expect(deferred.wait(until: .now() + .microseconds(200)) == nil)
        }
        let waiters = try #require(registry(of: deferred))
        #expect(waiters.count == 0, "\(waiters.count) timed-out waiters are still registered")
        deferred.fill(with: 1)
        #expect(deferred.wait(until: .now()) == 1)
    }

    @Test func aSleepingWaitIsWokenByTheFill() {
        let deferred = Deferred<Int>()
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) { deferred.fill(with: 7) }
        #expect(deferred.wait(until: .now() + 10) == 7)
    }

    @Test func aWaitWithADeadlineShorterThanTheSpinNeverRegisters() {
        let deferred = Deferred<Int>()
        #expect(deferred.wait(until: .now() + .nanoseconds(300)) == nil)
        #expect(registry(of: deferred) == nil, "the wait spun until its deadline and left")
    }

    /// Tasks cancelled before they waited were counted as waiters that gave up, so every later
    /// cancellation rescanned all live waiters: quadratic.
    @Test func givingUpCostsTimeLinearInTheLiveWaiters() async throws {
        let deferred = Deferred<Int>()
        let waiters = try #require(storage(of: deferred)?.waiters())
        for _ in 0..<TestSize.sanitized(8_000) {
            let task = Task { try await deferred.get() }
            task.cancel()
            _ = await task.result
        }
        // Some of those tasks may have started, and joined the registry, before their
        // cancellation: what compactions looked at for them is not what this test measures.
        let scannedBefore = waiters.waitersScanned
        let live = TestSize.sanitized(1_000)
        let tasks = (0..<live).map { _ in Task { try await deferred.get() } }
        #expect(await registered(on: deferred, atLeast: live) != nil)
        for task in tasks {
            task.cancel()
            _ = await task.result
        }
        // Each compaction drops at least half of what it looks at, so the total is at most
        // twice the waiters that registered (1,994 for 1,000 cancelled one by one).
        let scanned = waiters.waitersScanned - scannedBefore
        #expect(scanned <= 2 * live, "compactions looked at \(scanned) waiters")
        #expect(waiters.count == 0)
        deferred.fill(with: 1)
    }

    /// A task cancelled between installing its continuation and joining the registry counted
    /// its give-up when there was nothing to drop, and then stayed registered.
    @Test func aTaskCancelledWhileJoiningTheRegistryDoesNotStay() async throws {
        let deferred = Deferred<Int>()
        let waiters = try #require(storage(of: deferred)?.waiters())
        let waiter = AsyncWaiter<Int>()
        let outcome: Result<Int, any Error> = await withUnsafeContinuation { finished in
            Task.detached {
                do {
                    let value = try await withUnsafeThrowingContinuation { continuation in
                        // The steps of get(), with the cancellation landing between them.
                        guard waiter.install(continuation) else {
                            return
                        }
                        if waiter.cancel() {
                            waiters.waiterGaveUp()
                        }
                        #expect(waiters.add(waiter))
                    }
                    finished.resume(returning: .success(value))
                } catch {
                    finished.resume(returning: .failure(error))
                }
            }
        }
        #expect((try? outcome.get()) == nil, "the task was cancelled")
        #expect(waiters.count == 0, "\(waiters.count) waiters are still registered")
        deferred.fill(with: 1)
    }

    /// Dispatch takes a deadline beyond 2^62 ns for another clock and times out at once.
    @Test(arguments: [UInt64(1) << 62, UInt64.max - 1])
    func aDeadlineCenturiesAwayWaitsForTheValue(_ uptime: UInt64) {
        let deferred = Deferred<Int>()
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(5)) { deferred.fill(with: 3) }
        #expect(deferred.wait(until: DispatchTime(uptimeNanoseconds: uptime)) == 3)
    }

    @Test func aTimedOutWaitRacingTheFillReturnsTheValueOrNil() {
        final class Round: Sendable {
            let deferred = Deferred<Int>()
            let result = Deferred<Int?>()
            /// From a deadline that passes during the spin to one that needs a sleep.
            let patience = DispatchTimeInterval.nanoseconds(.random(in: 0...12_000))
        }
        RaceHarness.expectInterleavings(
            "timed-out wait against fill",
            rounds: TestSize.current.raceRounds,
            expected: ["value", "timed out"],
            setup: Round.init,
            left: { $0.result.fill(with: $0.deferred.wait(until: .now() + $0.patience)) },
            right: { _ = $0.deferred.fill(with: 1) },
            classify: { round in
                let result = round.result.peek() ?? nil
                #expect(result == nil || result == 1)
                #expect(round.deferred.peek() == 1)
                return result == 1 ? "value" : "timed out"
            }
        )
    }
}

/// The storage of `deferred`.
private func storage(of deferred: Deferred<Int>) -> Storage<Int>? {
    guard case .storage(let storage) = deferred.backing else {
        return nil
    }
    return storage
}

/// The registry of waiters that may give up of `deferred`, if one was made.
private func registry(of deferred: Deferred<Int>) -> WaiterRegistry<Int>? {
    guard let storage = storage(of: deferred) else {
        return nil
    }
    let bits = storage.waiterRegistry.load(ordering: .acquiring)
    return bits == 0 ? nil : RetainedBits.borrow(bits)
}

/// Waits until `count` waiters registered on `deferred`; returns its registry.
private func registered(on deferred: Deferred<Int>, atLeast count: Int) async -> WaiterRegistry<Int>? {
    for _ in 0..<2_000 {
        if let waiters = registry(of: deferred), waiters.count >= count {
            return waiters
        }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return nil
}
