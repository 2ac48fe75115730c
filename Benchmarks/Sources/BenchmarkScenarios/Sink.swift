public import Synchronization

/// Where handlers put the values they receive, so that the optimizer cannot drop the work.
///
/// A global, so that handlers capture nothing and every implementation's handler closure is
/// equally free of context allocations.
public let sink = Atomic<Int>(0)

/// Adds `value` to the sink.
@inlinable
public func consume(_ value: Int) {
    sink.wrappingAdd(value, ordering: .relaxed)
}
