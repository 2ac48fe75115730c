/// How long a blocking wait polls before it sleeps, learned from how recent waits went: the
/// pure rules, with no atomics or clocks (``BlockingWaitSpin`` holds the process's policy).
///
/// Polling pays when sleeping is dear: on an idle machine a sleeping thread's core drops into a
/// power-saving state, and waking it takes microseconds to tens of microseconds, while the other
/// thread is about to deliver the value within one. Polling is waste when sleeping is cheap: on
/// a busy machine every core is awake and a woken thread runs within a few microseconds, while
/// a polling thread takes a core that the thread about to deliver the value may need. So the
/// policy watches how long waits that slept were asleep: each sleep that took long, and each
/// poll that caught its value, raises the limit by a step; each sleep that was short lowers it
/// by one, down to no polling at all.
///
/// Polling is worst where threads outnumber cores: a polling thread that uses up its share of
/// a core is set aside for a whole time slice of another process (milliseconds), while a thread
/// that slept is let back in at once. A poll that sees the clock jump (the thread was off its
/// core) turns polling off for the next few thousand waits, whatever they see.
///
/// Measured on a two-core machine (the Performance guide): idle, a ping-pong of blocking waits
/// is caught by polls of about a microsecond; with both cores busy, any poll makes it slower.
@usableFromInline
internal struct SpinPolicy: Equatable, Sendable {
    /// The current poll limit, in nanoseconds.
    @usableFromInline
    internal private(set) var limit: UInt64

    /// How many more waits poll not at all, after a poll was preempted.
    @usableFromInline
    internal private(set) var holdOff: UInt64

    /// The longest poll: beyond it, two threads handing values back and forth would keep both
    /// cores busy polling (processor time above 1.2 times the wall time).
    @usableFromInline
    internal static var maximum: UInt64 { 1_500 }

    /// How much one wait moves the limit.
    @usableFromInline
    internal static var step: UInt64 { 250 }

    /// A sleep shorter than this was cheap: the core was awake.
    @usableFromInline
    internal static var cheapSleep: UInt64 { 8_000 }

    /// A gap between two readings of the clock in a poll longer than this means the polling
    /// thread lost its core: another thread wanted it.
    @usableFromInline
    internal static var preemptionGap: UInt64 { 500_000 }

    /// How many waits poll not at all after a poll was preempted.
    @usableFromInline
    internal static var waitsWithoutPollingAfterPreemption: UInt64 { 4_096 }

    /// The policy a process starts with.
    @usableFromInline
    internal static var initial: SpinPolicy { SpinPolicy(limit: 1_000) }

    @usableFromInline
    internal init(limit: UInt64, holdOff: UInt64 = 0) {
        self.limit = limit
        self.holdOff = holdOff
    }

    /// How a wait that found no value at first went.
    @usableFromInline
    internal enum Outcome: Equatable, Sendable {
        /// The poll saw the value.
        case caught
        /// The poll gave up, and the value woke the waiter after it slept this many nanoseconds.
        case slept(UInt64)
        /// The polling thread lost its core while it polled.
        case preempted
    }

    /// The policy after a wait with `outcome`.
    @usableFromInline
    internal func after(_ outcome: Outcome) -> SpinPolicy {
        switch outcome {
        case .preempted:
            SpinPolicy(limit: 0, holdOff: Self.waitsWithoutPollingAfterPreemption)
        case _ where holdOff > 0:
            SpinPolicy(limit: 0, holdOff: holdOff - 1)
        case .slept(let nanoseconds) where nanoseconds < Self.cheapSleep:
            SpinPolicy(limit: limit < Self.step ? 0 : limit - Self.step)
        case .caught, .slept:
            SpinPolicy(limit: min(Self.maximum, limit + Self.step))
        }
    }

    /// When a wait that starts at `start` (uptime, in nanoseconds) stops polling and sleeps.
    ///
    /// A deadline closer than the longest poll is polled to, whatever the limit: sleeping that
    /// briefly costs more than the wait itself.
    @usableFromInline
    internal func pollEnd(from start: UInt64, deadline: UInt64) -> UInt64 {
        deadline &- start <= Self.maximum ? deadline : min(deadline, start &+ limit)
    }

    /// The policy as one word, for an atomic.
    @usableFromInline
    internal var word: UInt64 { holdOff << 32 | limit }

    /// The policy stored as `word`.
    @usableFromInline
    internal init(word: UInt64) {
        self.init(limit: word & 0xFFFF_FFFF, holdOff: word >> 32)
    }
}
