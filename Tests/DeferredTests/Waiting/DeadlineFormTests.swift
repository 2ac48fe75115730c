import Deferred
import Dispatch
import Testing

/// A blocking wait takes its limit as a `DispatchTime`, a `Duration` or an instant of the
/// continuous clock, on every kind of reader, with the same meaning.
@Suite struct DeadlineFormTests {
    enum Reader: String, CaseIterable, CustomTestStringConvertible {
        case deferred, future, mapped, lazyMap, ignored, attempt
        var testDescription: String { rawValue }
    }

    @Test(arguments: Reader.allCases)
    func aDurationOrAnInstantLimitsTheWaitAndAFillEndsIt(_ reader: Reader) {
        let deferred = Deferred<Int>()
        let writer = DeferredAttempt<Int, CancellationError>()
        let fill: @Sendable () -> Void = {
            deferred.fill(with: 1)
            writer.succeed(with: 1)
        }
        switch reader {
        case .deferred: check(deferred, fill: fill)
        case .future: check(Future(deferred), fill: fill)
        case .mapped: check(deferred.map(upon: .immediate) { $0 + 1 }, fill: fill)
        case .lazyMap: check(deferred.lazy.map { $0 + 1 }, fill: fill)
        case .ignored: check(deferred.ignored(), fill: fill)
        case .attempt: check(writer.attempt, fill: fill)
        }
    }

    private func check(_ reader: some FutureProtocol, fill: @escaping @Sendable () -> Void) {
        let start = ContinuousClock.now
        #expect(reader.wait(for: .milliseconds(30)) == nil)
        #expect(ContinuousClock.now - start >= .milliseconds(30), "a wait for a duration lasts that long")
        let deadline = ContinuousClock.now + .milliseconds(20)
        #expect(reader.wait(until: deadline) == nil)
        #expect(ContinuousClock.now >= deadline, "a wait until an instant lasts until it")
        #expect(reader.wait(for: .seconds(-1)) == nil, "a negative duration only looks")

        DispatchQueue.global().asyncAfter(deadline: .now() + 0.02, execute: fill)
        #expect(reader.wait(for: .seconds(600)) != nil, "the fill ends the wait")
        #expect(reader.wait(until: ContinuousClock.now - .seconds(1)) != nil, "a passed deadline still sees the value")
        #expect(reader.wait(for: .zero) != nil)
    }
}
