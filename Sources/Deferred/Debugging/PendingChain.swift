/// One link of a ``PendingChain``: the writer a chain starts from, a stage derived from it, or
/// what waits at its end.
public struct PendingLink: Sendable, Equatable, CustomStringConvertible {
    /// What a link is.
    public enum Kind: String, Sendable, Equatable {
        /// A writer the caller made: a `Deferred`, a `DeferredAttempt`, or an `Attempt` made from
        /// a result or from work.
        case writer
        /// A future or attempt that a combinator made from the one above it (`map`, `timeout`,
        /// a join), or one the caller named.
        case stage
        /// A callback added with `upon` (or `uponSuccess`, `uponFailure`), on an executor.
        case callback
        /// A thread blocked in `wait`.
        case thread
        /// A task awaiting the value.
        case task
    }

    /// What the link is.
    public let kind: Kind

    /// Its name: a writer's type (`Deferred<Profile>`), a stage's operator (`map`,
    /// `timeout(5.0 seconds)`), or who waits (`upon on DispatchQueue`, `task "Load profile"
    /// (priority medium)`, `thread blocked at App/Main.swift:12`).
    public let name: String

    /// The name the caller gave it with `named(_:)` or `Deferred(named:)`, if any.
    public let label: String?

    /// Where a writer was made (`#fileID:#line`); `nil` for other links.
    public let place: String?

    /// How long it has been pending (a writer or stage) or waiting (a callback, a thread, a
    /// task), when the chain was listed.
    public let age: Duration

    /// Creates a link; the library makes them, a test may make them to compare.
    ///
    /// - Parameters:
    ///   - kind: What the link is.
    ///   - name: Its name.
    ///   - label: The name the caller gave it.
    ///   - place: Where a writer was made.
    ///   - age: How long it has been pending or waiting.
    public init(kind: Kind, name: String, label: String? = nil, place: String? = nil, age: Duration) {
        self.kind = kind
        self.name = name
        self.label = label
        self.place = place
        self.age = age
    }

    /// Whether the link waits for the value rather than producing one: a callback, a thread or
    /// a task.
    public var isWaiter: Bool {
        kind == .callback || kind == .thread || kind == .task
    }

    /// The link as a dump shows it, such as `Deferred<Profile> "profile 42" made at
    /// App/ProfileService.swift:31, 3.2 s`.
    public var description: String {
        var text = name
        if let label {
            text += " \"\(label)\""
        }
        if let place {
            text += " made at \(place)"
        }
        if kind == .writer || isWaiter {
            text += ", \(PendingLink.format(age))"
        }
        return text
    }

    /// `age` in a dump: `850 ms`, `3.2 s`, `12 min`.
    static func format(_ age: Duration) -> String {
        let seconds = Double(age.components.seconds) + Double(age.components.attoseconds) * 1e-18
        if seconds < 1 {
            return "\(Int((seconds * 1_000).rounded())) ms"
        }
        if seconds < 120 {
            return "\((seconds * 10).rounded() / 10) s"
        }
        return "\(Int((seconds / 60).rounded())) min"
    }
}

/// A pending chain: a writer that is not filled, the stages derived from it down to one that
/// something waits for, and that waiter; as ``PendingFutures/dump()`` lists it.
///
/// ```text
/// Deferred<Profile> "profile 42" made at App/ProfileService.swift:31, 3.2 s ← map ← timeout(5.0 seconds)
///     ← task "Load profile" (priority medium), 3.1 s
/// ```
///
/// A chain starts at the highest pending future that was recorded: the writer, unless the
/// writer was made before recording began (then the first recorded stage below it).
public struct PendingChain: Sendable, Equatable, CustomStringConvertible {
    /// The links, from the writer (or the highest recorded pending stage) down to the waiter,
    /// if anything waits.
    public let links: [PendingLink]

    /// Creates a chain of `links`, from the top down.
    ///
    /// - Parameter links: The links; at least one.
    public init(links: [PendingLink]) {
        precondition(!links.isEmpty, "a pending chain has at least one link")
        self.links = links
    }

    /// The link the chain starts from: the writer that is not filled.
    public var source: PendingLink {
        links[0]
    }

    /// What waits at the end of the chain, if anything does: a callback, a thread or a task.
    public var waiter: PendingLink? {
        links.last.flatMap { $0.isWaiter ? $0 : nil }
    }

    /// The chain on one line, each link followed by ` ← ` and what waits on it; `, with no
    /// reader` ends a chain that nothing waits for.
    public var description: String {
        links.map(\.description).joined(separator: " ← ") + (waiter == nil ? ", with no reader" : "")
    }
}

/// Something wrong that ``PendingFutures`` noticed: a lost writer, a limit that passed while its
/// work still runs, a shared run that runs for nobody, a failure nobody observed, a wait longer
/// than ``PendingFutures/longWaitThreshold``.
public struct PendingLint: Sendable, Equatable, CustomStringConvertible {
    /// What kind of problem it is.
    public enum Kind: String, Sendable, Equatable, CaseIterable {
        /// A writer was released (or a `DeferredAttempt` lost) unfinished while something waited
        /// for it: what waits will never run.
        case lostWriter
        /// A time limit (`timeout`) passed while the work it limits still runs: the work was not
        /// told to stop, or does not stop when told.
        case limitPassedWhileWorkRuns
        /// Every caller of a shared run (see `SharedAttempts`) left, and the run's work still
        /// runs: the work does not stop when told.
        case sharedRunWithoutCallers
        /// An attempt failed (not cancelled, not abandoned) and was released without any
        /// handler, reader or derived stage having received the failure.
        case unobservedFailure
        /// Something has waited for a future longer than ``PendingFutures/longWaitThreshold``.
        case longWait
    }

    /// What kind of problem it is.
    public let kind: Kind

    /// What happened, naming the future and where it was made, such as `DeferredAttempt<Int,
    /// any Error> made at App/Loader.swift:12 failed with TimeoutError and was released with
    /// nobody observing its failure`.
    public let message: String

    /// Creates a lint; the library makes them, a test may make them to compare.
    ///
    /// - Parameters:
    ///   - kind: What kind of problem it is.
    ///   - message: What happened.
    public init(kind: Kind, message: String) {
        self.kind = kind
        self.message = message
    }

    /// The lint as a dump shows it: its kind, then its message.
    public var description: String {
        "\(kind.rawValue): \(message)"
    }
}

/// What ``PendingFutures/dump()`` found: every pending chain, and the lints.
public struct PendingDump: Sendable, Equatable, CustomStringConvertible {
    /// Every pending chain, oldest source first.
    public let chains: [PendingChain]

    /// The lints: of futures that are gone (the last 32 such), then of those still pending.
    public let lints: [PendingLint]

    /// Creates a dump of `chains` and `lints`.
    ///
    /// - Parameters:
    ///   - chains: The pending chains.
    ///   - lints: The lints.
    public init(chains: [PendingChain], lints: [PendingLint]) {
        self.chains = chains
        self.lints = lints
    }

    /// The dump as text: a line for each chain, then a line for each lint.
    public var description: String {
        var lines = ["Pending futures: \(chains.count) chain\(chains.count == 1 ? "" : "s")"]
        lines += chains.map { "  \($0)" }
        if !lints.isEmpty {
            lines.append("Lints: \(lints.count)")
            lines += lints.map { "  \($0)" }
        }
        return lines.joined(separator: "\n")
    }
}
