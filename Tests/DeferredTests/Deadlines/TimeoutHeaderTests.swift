import Deferred
import DeferredExecutors
import Testing

/// A deadline crosses the wire as a `grpc-timeout` value: written in the finest unit that fits
/// eight digits, never promising more time than remains, and read back strictly.
@Suite struct TimeoutHeaderTests {
    /// A budget and how the header writes it.
    struct Written: Sendable, CustomTestStringConvertible {
        let remaining: Duration
        let header: String
        var testDescription: String { "\(remaining) → \(header)" }
    }

    @Test(arguments: [
        Written(remaining: .nanoseconds(1), header: "1n"),
        Written(remaining: .nanoseconds(99_999_999), header: "99999999n"),
        Written(remaining: .nanoseconds(100_000_000), header: "100000u"),
        Written(remaining: .milliseconds(250), header: "250000u"),
        Written(remaining: .seconds(2), header: "2000000u"),
        Written(remaining: .nanoseconds(99_999_999_999), header: "99999999u"),
        Written(remaining: .seconds(100), header: "100000m"),
        Written(remaining: .seconds(100_000), header: "100000S"),
        Written(remaining: .seconds(99_999_999) + .milliseconds(999), header: "99999999S"),
        Written(remaining: .seconds(100_000_000), header: "1666666M"),
        Written(remaining: .seconds(6_000_000_000), header: "1666666H"),
        Written(remaining: .seconds(Int64.max), header: "99999999H"),
    ])
    func aBudgetIsWrittenInTheFinestUnitThatFitsEightDigits(_ written: Written) {
        #expect(TimeoutHeader(remaining: written.remaining).description == written.header)
    }

    @Test(arguments: [Duration.zero, .nanoseconds(-1), .seconds(-3), .seconds(Int64.min)])
    func aBudgetThatIsSpentIsZeroNanoseconds(_ remaining: Duration) {
        let header = TimeoutHeader(remaining: remaining)
        #expect(header.description == "0n")
        #expect(header.remaining == .zero)
    }

    /// Rounding goes down in every unit, loses less than one of the unit chosen, and a finer
    /// unit would have needed more than eight digits.
    @Test func aHeaderNeverSaysMoreTimeRemainsThanDoes() {
        let units = TimeoutHeader.Unit.allCases  // coarsest first
        var wrong: [String] = []
        for _ in 0..<1_000 {
            let seconds = Int64.random(in: 0...(1 << Int64.random(in: 0...40)))
            let attoseconds = Int64.random(in: 0..<1_000_000_000_000_000_000)
            let remaining = Duration(secondsComponent: seconds, attosecondsComponent: attoseconds)
            let header = TimeoutHeader(remaining: remaining)
            let finer = units.firstIndex(of: header.unit).map { $0 + 1 < units.count ? units[$0 + 1] : nil } ?? nil
            // Only a budget past what eight digits of hours write loses more than one unit.
            let clamped = header.unit == .hours && header.amount == TimeoutHeader.maximumAmount
            if header.remaining > remaining || (!clamped && remaining - header.remaining >= header.unit.duration)
                || header.amount > TimeoutHeader.maximumAmount
                || finer.map({ remaining < $0.duration * (TimeoutHeader.maximumAmount + 1) }) == true
            {
                wrong.append("\(remaining) written as \(header)")
            }
        }
        #expect(wrong.isEmpty, "\(wrong.prefix(5))")
    }

    @Test(arguments: ["0n", "1H", "59M", "7S", "250m", "99999999u", "00000001n", "12345678S"])
    func aValidHeaderReadsBackAsWritten(_ text: String) throws {
        let header = try #require(TimeoutHeader(text))
        #expect(header.description.trimmingLeadingZeros == text.trimmingLeadingZeros)
        #expect(TimeoutHeader(remaining: header.remaining).remaining == header.remaining)
    }

    @Test func eachUnitReadsAsItsDuration() throws {
        let expected: [String: Duration] = [
            "3H": .seconds(10_800), "3M": .seconds(180), "3S": .seconds(3),
            "3m": .milliseconds(3), "3u": .microseconds(3), "3n": .nanoseconds(3),
        ]
        for (text, duration) in expected {
            #expect(try #require(TimeoutHeader(text)).remaining == duration, "\(text)")
        }
        #expect(try #require(TimeoutHeader("99999999H")).remaining == .seconds(99_999_999 * 3_600))
    }

    @Test(arguments: [
        "", "S", "123456789S", "000000000n", "12", "12s", "12h", "12 S", " 12S", "12S ", "+12S", "-12S",
        "1.5S", "12SS", "١٢S", "12Ｓ", "0x1S", "12µ",
    ])
    func anythingElseIsRejected(_ text: String) {
        #expect(TimeoutHeader(text) == nil)
    }

    @Test func amountsOutsideEightDigitsAreRejected() {
        #expect(TimeoutHeader(amount: -1, unit: .seconds) == nil)
        #expect(TimeoutHeader(amount: 100_000_000, unit: .seconds) == nil)
        #expect(TimeoutHeader(amount: 99_999_999, unit: .hours)?.description == "99999999H")
        #expect(TimeoutHeader(amount: 0, unit: .minutes)?.description == "0M")
    }

    /// On a virtual clock the round trip is exact: the receiver's deadline is the sender's,
    /// less what the wire took.
    @Test func aDeadlineCrossesTheWireAsTheTimeThatRemains() throws {
        let clock = VirtualTimeExecutor()
        clock.advance(by: .seconds(10))
        let deadline = clock.now.advanced(by: .milliseconds(1_500))
        let header = TimeoutHeader(until: deadline, on: clock)
        #expect(header.description == "1500000u")
        clock.advance(by: .milliseconds(20))  // the wire
        let received = try #require(TimeoutHeader(header.description)).deadline(on: clock)
        #expect(received == deadline.advanced(by: .milliseconds(20)))
        clock.advance(by: .seconds(2))
        #expect(TimeoutHeader(until: deadline, on: clock).description == "0n")
    }

    @Test func theContinuousClockIsTheDefault() {
        let deadline = ContinuousClock.now.advanced(by: .seconds(30))
        let header = TimeoutHeader(until: deadline)
        #expect(header.remaining <= .seconds(30))
        #expect(header.remaining > .seconds(20))
        let before = ContinuousClock.now
        let received = header.deadline()
        let after = ContinuousClock.now
        #expect(received >= before.advanced(by: header.remaining))
        #expect(received <= after.advanced(by: header.remaining))
    }
}

extension String {
    fileprivate var trimmingLeadingZeros: Substring {
        let digits = dropLast().drop { $0 == "0" }
        return (digits.isEmpty ? "0" : digits) + suffix(1)
    }
}
