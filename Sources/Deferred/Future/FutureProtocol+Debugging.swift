extension FutureProtocol {
    /// A description for debugging, such as `Deferred(filled: 42)` or `Future(unfilled)`.
    public var debugDescription: String {
        let typeName = String(describing: Self.self).prefix { $0 != "<" }
        guard let value = peek() else {
            return "\(typeName)(unfilled)"
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
