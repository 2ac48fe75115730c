extension FutureProtocol {
    /// Returns a future filled with a tuple of this future's value and the others' values,
    /// once all of them are filled.
    ///
    /// The futures may have different value types, and any number of them may be joined:
    ///
    /// ```swift
    /// let profile = name.and(age, avatar)  // Future<(String, Int, Image)>
    /// profile.upon(.main) { name, age, avatar in show(name, age, avatar) }
    /// ```
    ///
    /// The joined future holds no reference to the inputs, so dropping it while they are
    /// pending leaks nothing. Chains of `and` of any length fill and release without growing
    /// the stack.
    ///
    /// - Parameter others: The futures to join with this one.
    /// - Returns: A read-only future of all the values, in argument order.
    @inlinable
    public func and<each Other: FutureProtocol>(
        _ others: repeat each Other
    ) -> Future<(Value, repeat (each Other).Value)> {
        var count = 1
        for _ in repeat each others {
            count += 1
        }
        let join = CollectingJoin<any Sendable, (Value, repeat (each Other).Value)>(count: count) { values in
            var index = 0
            func next<Element>(_: Element.Type) -> Element {
                defer { index += 1 }
                return values[index] as! Element
            }
            return (next(Value.self), repeat next((each Other).Value.self))
        }
        join.link(self, at: 0) { $0 }
        var index = 0
        for other in repeat each others {
            index += 1
            join.link(other, at: index) { $0 }
        }
        return Future(storage: join.result)
    }
}
