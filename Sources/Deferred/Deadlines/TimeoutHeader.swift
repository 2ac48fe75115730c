/// How long a caller will still wait, written as a `grpc-timeout` header value, so that a service
/// can pass its caller's deadline on to the next service over the wire.
///
/// The format is gRPC's: one to eight ASCII digits and a unit, `H` (hours), `M` (minutes), `S`
/// (seconds), `m` (milliseconds), `u` (microseconds) or `n` (nanoseconds). `250m` is a quarter of
/// a second.
///
/// ```swift
/// // Going out: what remains of the budget, read on the clock the deadline is on.
/// let header = TimeoutHeader(until: deadline)
/// request.headerFields["grpc-timeout"] = header.description
///
/// // Coming in: the caller's budget, as a deadline on this machine's clock.
/// if let value = request.headerFields["grpc-timeout"], let header = TimeoutHeader(value) {
///     let deadline = header.deadline()
/// }
/// ```
///
/// A header never promises more time than remains: the remaining time is rounded down to the
/// finest unit that writes it in eight digits (a budget over 99,999,999 hours is written as that
/// many), and a deadline that has passed is `0n`. A value is remaining time, not an instant: the
/// time it spends on the wire is the receiver's loss, as in gRPC.
///
/// Two headers are equal when they are written alike: `1S` and `1000m` are the same budget but
/// different headers.
public struct TimeoutHeader: Hashable, Sendable, LosslessStringConvertible {
    /// The unit of a header's amount, written as one character.
    public enum Unit: Character, CaseIterable, Hashable, Sendable {
        /// `H`: hours.
        case hours = "H"
        /// `M`: minutes.
        case minutes = "M"
        /// `S`: seconds.
        case seconds = "S"
        /// `m`: milliseconds.
        case milliseconds = "m"
        /// `u`: microseconds.
        case microseconds = "u"
        /// `n`: nanoseconds.
        case nanoseconds = "n"

        /// One of this unit.
        public var duration: Duration {
            switch self {
            case .hours: .seconds(3_600)
            case .minutes: .seconds(60)
            case .seconds: .seconds(1)
            case .milliseconds: .milliseconds(1)
            case .microseconds: .microseconds(1)
            case .nanoseconds: .nanoseconds(1)
            }
        }
    }

    /// The largest amount the format can write: eight digits.
    public static let maximumAmount = 99_999_999

    /// How many of ``unit`` remain, from 0 to ``maximumAmount``.
    public let amount: Int

    /// The unit of ``amount``.
    public let unit: Unit

    /// A header of `amount` of `unit`, or `nil` if `amount` is negative or over ``maximumAmount``.
    ///
    /// - Parameters:
    ///   - amount: How many of `unit` remain.
    ///   - unit: The unit of `amount`.
    public init?(amount: Int, unit: Unit) {
        guard (0...Self.maximumAmount).contains(amount) else { return nil }
        self.amount = amount
        self.unit = unit
    }

    /// The header of `remaining` time: in the finest unit that writes it in eight digits, rounded
    /// down, so it never says more time remains than does; `0n` when nothing remains.
    ///
    /// - Parameter remaining: The time that remains; zero or less writes `0n`.
    public init(remaining: Duration) {
        let total = remaining.totalAttoseconds
        guard total > 0 else {
            self.init(unchecked: 0, .nanoseconds)
            return
        }
        // From the finest unit up: the first whose whole count fits in eight digits.
        for unit in [Unit.nanoseconds, .microseconds, .milliseconds, .seconds, .minutes] {
            let count = total / unit.attoseconds
            if count <= Int128(Self.maximumAmount) {
                self.init(unchecked: Int(count), unit)
                return
            }
        }
        self.init(unchecked: Int(min(total / Unit.hours.attoseconds, Int128(Self.maximumAmount))), .hours)
    }

    /// The header of the time that remains until `deadline` on `clock` (the continuous clock
    /// unless you name another, such as a test's virtual clock).
    ///
    /// - Parameters:
    ///   - deadline: The instant after which the caller no longer waits.
    ///   - clock: The clock `deadline` is on; its `now` is when the time remaining is read.
    public init<C: Clock>(until deadline: C.Instant, on clock: C = ContinuousClock()) where C.Duration == Duration {
        self.init(remaining: clock.now.duration(to: deadline))
    }

    /// Reads a header value such as `250m`, or returns `nil` unless it is one to eight ASCII
    /// digits followed by one of the units `H`, `M`, `S`, `m`, `u` and `n`, with nothing before or
    /// after.
    ///
    /// - Parameter description: The header's value as received.
    public init?(_ description: String) {
        let bytes = description.utf8
        guard let last = bytes.last, let unit = Unit(ascii: last) else { return nil }
        let digits = bytes.dropLast()
        guard (1...8).contains(digits.count) else { return nil }
        var amount = 0
        for byte in digits {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            amount = amount * 10 + Int(byte - UInt8(ascii: "0"))
        }
        self.init(unchecked: amount, unit)
    }

    /// The time this header says remains.
    public var remaining: Duration {
        unit.duration * amount
    }

    /// The instant at which this header's time runs out, counted from now on `clock` (the
    /// continuous clock unless you name another).
    ///
    /// - Parameter clock: The clock of the deadline; its `now` is when the header was received.
    /// - Returns: `clock.now` advanced by ``remaining``.
    public func deadline<C: Clock>(on clock: C = ContinuousClock()) -> C.Instant where C.Duration == Duration {
        clock.now.advanced(by: remaining)
    }

    /// The header's value as written on the wire, such as `250m`.
    public var description: String {
        "\(amount)\(unit.rawValue)"
    }

    private init(unchecked amount: Int, _ unit: Unit) {
        self.amount = amount
        self.unit = unit
    }
}

extension TimeoutHeader.Unit {
    /// The unit written as the ASCII character `byte`, if any.
    fileprivate init?(ascii byte: UInt8) {
        guard byte < 0x80 else { return nil }
        self.init(rawValue: Character(Unicode.Scalar(byte)))
    }

    /// Attoseconds in one of this unit.
    fileprivate var attoseconds: Int128 {
        duration.totalAttoseconds
    }
}

extension Duration {
    /// The whole duration in attoseconds (`Duration.attoseconds` needs newer Apple releases than
    /// the package's).
    fileprivate var totalAttoseconds: Int128 {
        let (seconds, attoseconds) = components
        return Int128(seconds) * 1_000_000_000_000_000_000 + Int128(attoseconds)
    }
}
