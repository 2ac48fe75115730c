extension FutureProtocol {
    /// A description for debugging, such as `Deferred(filled: 42)` or `Future(unfilled)`.
    ///
    /// An unfilled `Deferred`, `Future` or `Attempt` also says whether anything waits for its
    /// value (a handler, a derived future, a blocked thread or a task), and, if
    /// ``PendingFutures`` recorded it, where it was made:
    /// `Deferred(unfilled, waited for, made at App/ProfileService.swift:31)`.
    public var debugDescription: String {
        let typeName = String(describing: Self.self).prefix { $0 != "<" }
        guard let value = peek() else {
            guard let storage = (self as? any TrackedStorageHolder)?.trackedStorage else {
                return "\(typeName)(unfilled)"
            }
            var details = ""
            if storage.isTrackedWaitedFor {
                details += ", waited for"
            }
            if let place = PendingFutures.place(of: storage) {
                details += ", made at \(place)"
            }
            return "\(typeName)(unfilled\(details))"
        }
        return "\(typeName)(filled: \(String(reflecting: value)))"
    }

    /// A mirror that shows whether the future is filled and, if it is, its value.
    public var customMirror: Mirror {
        guard let value = peek() else {
            return Mirror(self, children: ["isFilled": false], displayStyle: .struct)
        }
        return Mirror(self, children: ["isFilled": true, "value": value], displayStyle: .struct)
    }
}

/// A future whose storage ``FutureProtocol/debugDescription`` may ask what waits for it.
internal protocol TrackedStorageHolder {
    /// The storage of this future, if it has one of its own.
    var trackedStorage: (any TrackedFuture)? { get }
}

extension FutureSource {
    /// The storage, if this source has one.
    internal var trackedStorage: (any TrackedFuture)? {
        if case .storage(let storage) = self {
            return storage
        }
        return nil
    }
}

extension Deferred: TrackedStorageHolder {
    internal var trackedStorage: (any TrackedFuture)? { source.trackedStorage }
}

extension Future: TrackedStorageHolder {
    internal var trackedStorage: (any TrackedFuture)? { source.trackedStorage }
}

extension Attempt: TrackedStorageHolder {
    internal var trackedStorage: (any TrackedFuture)? { node }
}
