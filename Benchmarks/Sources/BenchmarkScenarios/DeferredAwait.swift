import Deferred

extension Deferred {
    /// The value, awaited through `upon` and a continuation.
    ///
    /// This stands in for the library's own `await future.value` until that bridge exists.
    var value: Value {
        get async {
            await withCheckedContinuation { continuation in
                upon(.immediate) { continuation.resume(returning: $0) }
            }
        }
    }
}
