extension Collection where Element: FutureProtocol {
    /// Returns a future filled with the values of all these futures, in the order of the
    /// collection, once the last of them is filled.
    ///
    /// ```swift
    /// let pages: [Future<Page>] = ids.map { api.page($0) }
    /// pages.allFilled().upon(.main) { pages in show(pages) }
    /// ```
    ///
    /// An empty collection gives a future that is filled at once with `[]`. The joined future
    /// holds no reference to the input futures, so dropping it while they are pending leaks
    /// nothing.
    ///
    /// - Returns: A read-only future of every value, in collection order.
    @inlinable
    public func allFilled() -> Future<[Element.Value]> {
        let count = self.count
        guard count > 0 else {
            return Future(filledWith: [])
        }
        let join = CollectingJoin<Element.Value, [Element.Value]>(count: count) { $0 }
        var index = 0
        for future in self {
            join.link(future, at: index)
            index += 1
        }
        return Future(storage: join.result)
    }
}

extension Sequence where Element: FutureProtocol {
    /// Returns a future filled with the value of whichever of these futures is filled first.
    ///
    /// ```swift
    /// let fastest = [primary.lookup(key), replica.lookup(key)].firstFilled()
    /// ```
    ///
    /// The later values are ignored. An empty sequence gives ``Future/never``.
    ///
    /// - Returns: A read-only future of the first value delivered.
    @inlinable
    public func firstFilled() -> Future<Element.Value> {
        let first = Storage<Element.Value>()
        var isEmpty = true
        for future in self {
            isEmpty = false
            future.link(first, Storage<Element.Value>.forward)
            if first.isFilled {
                break
            }
        }
        return isEmpty ? .never : Future(storage: first)
    }
}
