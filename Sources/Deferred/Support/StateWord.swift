/// A decoded atomic word: the one integer a lock-free structure changes as a whole, with the
/// meaning that the extensions for its `Tag` give its bits.
///
/// ``StorageState``, ``DemandState`` and ``AttemptFlags`` are words of this kind. They only compute; the type
/// that owns the atomic performs the operations and asks its word what each party must do.
@frozen
@usableFromInline
internal struct StateWord<Tag, Raw: FixedWidthInteger & Sendable>: Hashable, Sendable {
    /// The raw word.
    @usableFromInline
    internal var rawValue: Raw

    @inlinable
    internal init(rawValue: Raw) {
        self.rawValue = rawValue
    }

    /// Whether any bit of `mask` is set.
    @inlinable
    internal func has(_ mask: Raw) -> Bool {
        rawValue & mask != 0
    }
}
