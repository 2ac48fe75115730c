import Deferred
import TestSupport
import Testing

/// Chains read the way they are written: each stage's types come from the stage before it, so
/// a chain after `mapError` type-checks in one statement, without annotations.
@Suite struct AttemptTypeInferenceTests {
    enum Low: Error, Equatable { case x }
    enum High: Error, Equatable { case w(Low) }

    @Test func aChainAfterMapErrorTypeChecksAsWritten() {
        let chained = Attempt<Int, Low>(failedWith: .x).mapError(upon: .immediate) { High.w($0) }.andThen(
            upon: .immediate
        ) { Attempt(succeededWith: $0 + 1) }
        #expect(chained.peek() == .failure(.w(.x)))

        let mapped = Attempt<Int, Low>(succeededWith: 1).mapError(upon: .immediate) { High.w($0) }.map(upon: .immediate)
        {
            $0 + 1
        }
        #expect(mapped.peek() == .success(2))

        let recovered = Attempt<Int, Low>(failedWith: .x).mapError(upon: .immediate) { High.w($0) }.recover(
            upon: .immediate
        ) { _ in 7 }
        #expect(recovered.peek() == .success(7))

        let fellBack = Attempt<Int, Low>(failedWith: .x).mapError(upon: .immediate) { High.w($0) }.fallback(
            upon: .immediate
        ) { _ in Attempt(succeededWith: 8) }
        #expect(fellBack.peek() == .success(8))
    }

    @Test func aStageThatThrowsStillTypeChecksAfterMapError() {
        let thrown = Attempt<Int, Low>(succeededWith: 1).mapError(upon: .immediate) { High.w($0) }.map(upon: .immediate)
        {
            value throws(High) in
            if value > 0 { throw .w(.x) }
            return value
        }
        #expect(thrown.peek() == .failure(.w(.x)))
    }

    @Test func anAndThenThatReturnsANewAttemptStaysAnAttempt() {
        let producer = DeferredAttempt<Int, TestError>()
        let next = producer.attempt.andThen(upon: .immediate) { Attempt(succeededWith: $0) }
        let mappedAfter = producer.attempt.andThen(upon: .immediate) { Attempt(succeededWith: $0) }.map(
            upon: .immediate
        ) {
            $0
        }
        let mappedBefore = producer.attempt.map(upon: .immediate) { $0 }.andThen(upon: .immediate) {
            Attempt(succeededWith: $0)
        }
        producer.succeed(with: 4)
        // Each is an attempt of the value, not a future of a result.
        let attempts: [Attempt<Int, TestError>] = [next, mappedAfter, mappedBefore]
        #expect(attempts.map { $0.peek() } == [.success(4), .success(4), .success(4)])
        #expect(Attempt(succeededWith: 3).peek().map { _ in true } == true, "Attempt(succeededWith:) stands on its own")
    }

    /// Stages after `mapError` whose closures do not pin the value's type, and stages after an
    /// `Attempt(succeededWith:)` of `any Error`, stay attempts of the failure type written before them.
    @Test func stagesWhoseClosuresSayLittleKeepTheFailureTypeBeforeThem() {
        let low = Attempt<Int, Low>(succeededWith: 1)
        let chains: [Attempt<Int, High>] = [
            low.mapError(upon: .immediate) { High.w($0) }.andThen(upon: .immediate) { _ in Attempt(failedWith: .w(.x))
            },
            low.mapError(upon: .immediate) { High.w($0) }.andThen(upon: .immediate) { Attempt(succeededWith: $0) },
            low.mapError(upon: .immediate) { High.w($0) }.map(upon: .immediate) { _ in 5 },
            low.mapError(upon: .immediate) { High.w($0) }.map(upon: .immediate) { $0 },
            low.mapError(upon: .immediate) { High.w($0) }.recover(upon: .immediate) { _ in 0 },
        ]
        #expect(chains.map { $0.peek() } == [.failure(.w(.x)), .success(1), .success(5), .success(1), .success(1)])
        let anyError: [Attempt<Int, any Error>] = [
            Attempt(succeededWith: 1).map(upon: .immediate) { $0 + 1 },
            Attempt(succeededWith: 1).recover(upon: .immediate) { _ in 0 },
        ]
        #expect(anyError.map { try? $0.peek()?.get() } == [2, 1])
    }

    /// The spellings of a throwing step that compile.
    ///
    /// Swift 6 types a throwing closure
    /// `throws(any Error)` unless it says otherwise, so on a typed attempt the closure names its
    /// error or is a function that does; on an `any Error` attempt nothing needs spelling. The
    /// spellings the compiler refuses, and where it says so, are compiled by the snippet check
    /// (ErrorsAndCancellation.md, "Typed errors in closures").
    @Test func aThrowingStepNamesItsErrorOrIsAFunctionThatDoes() {
        @Sendable func checked(_ value: Int) throws(Low) -> Int {
            if value < 0 { throw .x }
            return value
        }
        let typed = Attempt<Int, Low>(succeededWith: -1)
        let spelled: [Attempt<Int, Low>] = [
            typed.map(upon: .immediate) { value throws(Low) in try checked(value) },
            typed.map(upon: .immediate, transform: checked),
            typed.andThen(upon: .immediate) { value throws(Low) in Attempt(succeededWith: try checked(value)) },
            Attempt<Int, Low>(failedWith: .x).recover(upon: .immediate) { error throws(Low) in throw error },
            Attempt<Int, Low>(failedWith: .x).fallback(upon: .immediate) { error throws(Low) in throw error },
        ]
        #expect(spelled.map { $0.peek() } == Array(repeating: .failure(.x), count: 5))

        let loose = Attempt<Int, any Error>(succeededWith: -1)
        let unspelled = [
            loose.map(upon: .immediate) { value in
                if value < 0 { throw Low.x }
                return value
            },
            loose.map(upon: .immediate) { try checked($0) },
        ]
        #expect(unspelled.map { $0.peek().map { (try? $0.get()) == nil } } == [true, true])
    }
}
