/// A decoded atomic word: the one integer a lock-free structure changes as a whole, with the
/// meaning that the conforming type's extensions give its bits.
///
/// ``StorageState``, ``DemandState``, ``AttemptFlags`` and ``HandlerChunkState`` are words of
/// this kind. They only compute; the type that owns the atomic performs the operations and asks
/// its word what each party must do.
///
/// Each word is a concrete struct rather than one generic struct with a tag: an unoptimized
/// build (a debug build of the library, or a sanitizer's) looks up a generic struct's metadata
/// at every use, which cost a third of the processor time of a deep chain in a debug build.
@usableFromInline
internal protocol StateWord: Hashable, Sendable {
    /// The integer the atomic holds.
    associatedtype Raw: FixedWidthInteger & Sendable

    /// The raw word.
    var rawValue: Raw { get set }

    /// Decodes `rawValue`.
    init(rawValue: Raw)
}

extension StateWord {
    /// Whether any bit of `mask` is set.
    @inlinable
    internal func has(_ mask: Raw) -> Bool {
        rawValue & mask != 0
    }
}
