/// The type of a storage's value slot: `Value?`, and nothing else.
///
/// ``DeferredStorage`` takes its slot type as a generic parameter instead of writing
/// `Value?` in its stored property. A generic class's deinit is not specialized, and to
/// destroy a `Value?` field it would look up `Optional<Value>`'s metadata at run time on
/// every deallocation (about 300 instructions); a slot type that is itself a generic
/// argument comes with the class's metadata for free.
@usableFromInline
internal protocol ValueSlot<Wrapped>: SendableMetatype {
    associatedtype Wrapped

    /// An empty slot.
    static var none: Self { get }

    /// A slot holding `value`.
    init(_ value: Wrapped)

    /// The value in the slot, if any.
    var wrapped: Wrapped? { get }

    /// The value in a slot that holds one. (Read through the slot's own type, an unoptimized
    /// caller needs no `Optional<Wrapped>` metadata of its own.)
    var unwrapped: Wrapped { get }
}

extension Optional: ValueSlot {
    @inlinable
    internal var wrapped: Wrapped? { self }

    @inlinable
    internal var unwrapped: Wrapped { unsafelyUnwrapped }
}

/// The storage of a `Deferred<Value>`.
@usableFromInline
internal typealias Storage<Value: Sendable> = DeferredStorage<Value, Value?>
