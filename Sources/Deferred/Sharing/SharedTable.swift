/// The runs that ``SharedAttempts`` and ``SharedFutures`` share, by key: at most one *run* per
/// key at a time, each with a *generation* number, and the results kept for a while if asked.
///
/// Every decision about a key is made under the table's lock: whether a caller joins the run in
/// flight (`join` succeeds) or starts the next generation, and whether a run that ended is
/// forgotten or kept. Ends are reported with their generation, so a late report about a run that
/// a newer one replaced changes nothing. Nothing runs under the lock but dictionary operations,
/// `join` and `makeRun` (atomic steps and allocations); whatever an operation removes is
/// released after the lock is given back.
///
/// The dictionary is rebuilt smaller when it is mostly empty, so a table whose keys come and go
/// stays as small as the number of keys it holds at once.
///
/// `@unchecked Sendable` is sound because `entries` and `generations` are read and written only
/// inside `lock.withLock`, and `retention` never changes.
@usableFromInline
internal final class SharedTable<Key: Hashable & Sendable, Run: AnyObject, Kept: Sendable>: @unchecked Sendable {
    /// What the table holds for a key.
    @usableFromInline
    internal enum Entry {
        /// A run in flight.
        case running(Run, generation: UInt64)
        /// A run's result, kept until its time is up.
        case kept(Kept, generation: UInt64)
    }

    /// What a caller found for its key.
    @usableFromInline
    internal enum Found<Joined> {
        /// A kept result.
        case kept(Kept)
        /// The run in flight, joined.
        case joined(Run, Joined)
        /// A new run of `generation`, joined, that the caller must start.
        case started(Run, Joined, generation: UInt64)
    }

    /// How long results are kept, and where their time is counted.
    @usableFromInline
    internal struct Retention: Sendable {
        @usableFromInline
        internal let executor: any SchedulingExecutor

        /// How long to keep a kept result, or `nil` to forget it at once.
        @usableFromInline
        internal let duration: @Sendable (Kept) -> Duration?

        @inlinable
        internal init(executor: any SchedulingExecutor, duration: @escaping @Sendable (Kept) -> Duration?) {
            self.executor = executor
            self.duration = duration
        }
    }

    @usableFromInline
    internal let lock = TableLock()

    @exclusivity(unchecked)
    @usableFromInline
    internal var entries: [Key: Entry] = [:]

    @exclusivity(unchecked)
    @usableFromInline
    internal var generations: UInt64 = 0

    @usableFromInline
    internal let retention: Retention?

    @usableFromInline
    internal init(retention: Retention?) {
        self.retention = retention
    }

    /// How many keys have a run in flight or a kept result.
    @usableFromInline
    internal var count: Int {
        lock.withLock { entries.count }
    }

    /// Whether `key` has a run in flight or a kept result.
    @usableFromInline
    internal func contains(_ key: Key) -> Bool {
        lock.withLock { entries[key] != nil }
    }

    /// Finds what the table holds for `key`: a kept result, the run in flight if `join` can join
    /// it, or else a new run that `makeRun` makes for the next generation and joins.
    ///
    /// `join` returns `nil` for a run that ended (an attempt cancelled because every caller gave
    /// up): the new run replaces it.
    @inlinable
    internal func find<Joined>(
        _ key: Key,
        join: (Run) -> Joined?,
        makeRun: (_ generation: UInt64) -> (Run, Joined)
    ) -> Found<Joined> {
        var replaced: Entry?
        var refused: Run?
        let found: Found<Joined> = lock.withLock {
            switch entries[key] {
            case .kept(let kept, _):
                return .kept(kept)
            case .running(let run, _):
                if let joined = join(run) {
                    return .joined(run, joined)
                }
                refused = run
            case nil:
                break
            }
            generations &+= 1
            let (run, joined) = makeRun(generations)
            replaced = entries.updateValue(.running(run, generation: generations), forKey: key)
            return .started(run, joined, generation: generations)
        }
        withExtendedLifetime((replaced, refused)) {}
        return found
    }

    /// Records that the run of `generation` for `key` ended, with a result to keep if `kept` is
    /// not `nil` and the table keeps such results.
    ///
    /// Inlinable, like ``find(_:join:makeRun:)``, so that it is specialized for the table's
    /// types where a run is started: unspecialized, its optionals, tuples and entries took
    /// generic metadata lookups that cost more than the rest of a run with one caller.
    @inlinable
    internal func ended(_ key: Key, generation: UInt64, keeping kept: Kept?) {
        let duration = kept.flatMap { kept in retention?.duration(kept) }
        let removed: (key: Key?, value: Entry)? = lock.withLock {
            guard case .running(_, generation) = entries[key] else {
                return nil
            }
            if let kept, duration != nil {
                return entries.updateValue(.kept(kept, generation: generation), forKey: key).map { (nil, $0) }
            }
            return remove(key).map { ($0.key, $0.value) }
        }
        withExtendedLifetime(removed) {}
        if let retention, let duration, removed != nil {
            retention.executor.submit(after: duration) { [weak self] in
                self?.expire(key, generation: generation)
            }
        }
    }

    /// Forgets the result kept for `key` by the run of `generation`, if it is still there.
    @usableFromInline
    internal func expire(_ key: Key, generation: UInt64) {
        let removed: (key: Key, value: Entry)? = lock.withLock {
            guard case .kept(_, generation) = entries[key] else {
                return nil
            }
            return remove(key)
        }
        withExtendedLifetime(removed) {}
    }

    /// Forgets `key`: a kept result, or the run in flight, which goes on for the callers that
    /// joined it while the next caller starts a new one.
    @usableFromInline
    internal func forget(_ key: Key) {
        let removed: (key: Key, value: Entry)? = lock.withLock { remove(key) }
        withExtendedLifetime(removed) {}
    }

    /// Removes `key`, rebuilding the dictionary smaller if it is mostly empty; the caller holds
    /// the lock and releases what this returns after giving it back: the entry, and the key as
    /// the dictionary stored it (an equal key may be another instance, whose `deinit` must not
    /// run under the lock either).
    @inlinable
    internal func remove(_ key: Key) -> (key: Key, value: Entry)? {
        guard let index = entries.index(forKey: key) else {
            return nil
        }
        let removed = entries.remove(at: index)
        if entries.capacity > 64 && entries.count < entries.capacity / 8 {
            var smaller = [Key: Entry](minimumCapacity: entries.count * 2)
            for (key, entry) in entries {
                smaller[key] = entry
            }
            entries = smaller
        }
        return removed
    }
}
