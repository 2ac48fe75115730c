/// An object's address as the bits of an atomic word, carrying one retain: how the library's
/// lock-free structures keep objects in a word, and the one place they touch `Unmanaged`.
///
/// Objects are aligned to 16 bytes, so the four low bits of the address are free for flags;
/// every function here takes bits whose flags the caller has cleared.
@usableFromInline
package enum RetainedBits {
    /// Retains `object` and returns its address bits.
    @inlinable
    @inline(__always)
    package static func retain(_ object: some AnyObject) -> UInt {
        UInt(bitPattern: Unmanaged.passRetained(object).toOpaque())
    }

    /// Takes back the retain that ``retain(_:)`` gave out for the object at `bits` (non-zero).
    @inlinable
    @inline(__always)
    package static func take<Object: AnyObject>(_ bits: UInt, as _: Object.Type = Object.self) -> Object {
        Unmanaged<Object>.fromOpaque(UnsafeRawPointer(bitPattern: bits).unsafelyUnwrapped).takeRetainedValue()
    }

    /// The object at `bits` (non-zero), without taking its retain: only while the word that
    /// holds the retain cannot lose it.
    @inlinable
    @inline(__always)
    package static func borrow<Object: AnyObject>(_ bits: UInt, as _: Object.Type = Object.self) -> Object {
        Unmanaged<Object>.fromOpaque(UnsafeRawPointer(bitPattern: bits).unsafelyUnwrapped).takeUnretainedValue()
    }

    /// Calls `body` with the object at `bits` (non-zero) without retaining it: only while the
    /// word that holds the retain keeps it for as long as `body` runs.
    @inlinable
    @inline(__always)
    package static func withBorrowed<Object: AnyObject, Result>(
        _ bits: UInt, as _: Object.Type = Object.self, _ body: (Object) -> Result
    ) -> Result {
        Unmanaged<Object>.fromOpaque(UnsafeRawPointer(bitPattern: bits).unsafelyUnwrapped)._withUnsafeGuaranteedRef(
            body)
    }

    /// Drops the retain of the object at `bits` (non-zero).
    @inlinable
    @inline(__always)
    package static func release<Object: AnyObject>(_ bits: UInt, as _: Object.Type) {
        Unmanaged<Object>.fromOpaque(UnsafeRawPointer(bitPattern: bits).unsafelyUnwrapped).release()
    }
}
