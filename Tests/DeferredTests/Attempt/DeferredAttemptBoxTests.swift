import Deferred
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

/// A box keeps a writer where a noncopyable value cannot go, hands it out exactly once, and a
/// writer left in a released box abandons its attempt like any lost writer.
@Suite struct DeferredAttemptBoxTests {
    @Test func theFirstTakeReturnsTheWriterAndLaterOnesNothing() {
        let box = DeferredAttemptBox(DeferredAttempt<Int, TestError>())
        #expect(!box.isEmpty)
        let writer = box.take()
        let tookIt = writer != nil
        #expect(tookIt)
        #expect(box.isEmpty)
        let again = box.take() == nil
        #expect(again, "a second take() finds nothing")
        writer?.succeed(with: 4)
        #expect(box.attempt.peek() == .success(4), "the box's attempt is the writer's")
    }

    @Test func aWriterLeftInAReleasedBoxAbandonsItsAttempt() {
        var box: DeferredAttemptBox<Int, any Error>? = DeferredAttemptBox(DeferredAttempt<Int, any Error>())
        let attempt = box!.attempt
        #expect(attempt.peek() == nil)
        box = nil
        guard case .failure(let error) = attempt.peek() else {
            Issue.record("the attempt is still pending")
            return
        }
        let abandoned = error as? AbandonedError
        #expect(abandoned != nil, "abandoned, not cancelled: \(error)")
        #expect(
            abandoned.map { "\($0)".contains("DeferredAttemptBoxTests.swift") } == true,
            "it names where the writer was made")
    }

    @Test func aTakenWriterOutlivesItsBox() throws {
        var box: DeferredAttemptBox<Int, any Error>? = DeferredAttemptBox(DeferredAttempt<Int, any Error>())
        let attempt = box!.attempt
        let writer = box!.take()
        box = nil
        #expect(attempt.peek() == nil, "the writer is out of the box, still pending")
        writer?.succeed(with: 1)
        #expect(try attempt.peek()?.get() == 1)
    }

    @Test func racingTakesHandTheWriterToExactlyOneCaller() {
        final class Round: Sendable {
            let box = DeferredAttemptBox(DeferredAttempt<Int, TestError>())
            let winners = Atomic<Int>(0)
            let leftWon = Atomic<Bool>(false)
        }
        RaceHarness.expectInterleavings(
            "two take()s of one box",
            expected: ["left took it", "right took it"],
            setup: { Round() },
            left: { round in
                if let writer = round.box.take() {
                    round.winners.add(1, ordering: .relaxed)
                    round.leftWon.store(true, ordering: .relaxed)
                    writer.succeed(with: 1)
                }
            },
            right: { round in
                if let writer = round.box.take() {
                    round.winners.add(1, ordering: .relaxed)
                    writer.succeed(with: 2)
                }
            },
            classify: { round in
                #expect(round.winners.load(ordering: .relaxed) == 1, "exactly one take() got the writer")
                #expect(round.box.attempt.peek() != nil, "and finished it")
                return round.leftWon.load(ordering: .relaxed) ? "left took it" : "right took it"
            })
    }

    /// The recipe of the docs: a connection that multiplexes requests keeps their writers by id.
    @Test func aDictionaryOfPendingRequestsFinishesEachByItsId() throws {
        final class Connection: Sendable {
            private let pending = NSLockedDictionary()

            func send(_ id: Int) -> Attempt<String, any Error> {
                let box = DeferredAttemptBox(DeferredAttempt<String, any Error>())
                pending.set(box, for: id)
                return box.attempt
            }

            func received(_ reply: String, for id: Int) {
                pending.remove(id)?.take()?.succeed(with: reply)  // finished outside the lock
            }

            func close() {
                pending.removeAll()  // writers released: their attempts fail as abandoned
            }
        }
        final class NSLockedDictionary: @unchecked Sendable {
            // `@unchecked Sendable` is sound: `boxes` is used only under `lock`.
            private let lock = NSLock()
            private var boxes: [Int: DeferredAttemptBox<String, any Error>] = [:]
            func set(_ box: DeferredAttemptBox<String, any Error>, for id: Int) { lock.withLock { boxes[id] = box } }
            func remove(_ id: Int) -> DeferredAttemptBox<String, any Error>? {
                lock.withLock { boxes.removeValue(forKey: id) }
            }
            func removeAll() { lock.withLock { boxes.removeAll() } }
        }
        let connection = Connection()
        let first = connection.send(1)
        let second = connection.send(2)
        let third = connection.send(3)
        connection.received("two", for: 2)
        connection.received("one", for: 1)
        connection.received("again", for: 1)  // a duplicate reply finds no writer
        connection.close()
        #expect(try first.peek()?.get() == "one")
        #expect(try second.peek()?.get() == "two")
        #expect(
            third.peek().map { if case .failure(let error) = $0 { error is AbandonedError } else { false } } == true)
    }
}

/// Generic code over any promise, noncopyable writers included, says `& ~Copyable` and borrows.
func fillTwice<Promise: PromiseProtocol & ~Copyable>(_ promise: borrowing Promise, with value: Promise.Value) -> [Bool]
{
    [promise.fill(with: value), promise.fill(with: value)]
}

@Suite struct GenericPromiseTests {
    @Test func genericCodeThatAdmitsNoncopyablePromisesTakesWritersAndDeferreds() {
        let writer = DeferredAttempt<Int, TestError>()
        #expect(fillTwice(writer, with: .success(1)) == [true, false])
        #expect(writer.attempt.peek() == .success(1))
        let deferred = Deferred<Int>()
        #expect(fillTwice(deferred, with: 2) == [true, false])
        #expect(deferred.peek() == 2)
    }
}
