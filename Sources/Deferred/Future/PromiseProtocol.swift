/// The write side of a value that is not known yet: decide it, once.
///
/// ``Deferred`` is the promise of this library. Keep it private to the code that produces the
/// value and hand out a read-only ``Future``.
///
/// Code that only decides a value can take any promise:
///
/// ```swift
/// func finishLogin(_ session: some PromiseProtocol<String>, token: String) {
///     if !session.fill(with: token) {
///         print("a login had already finished; \(token) is ignored")
///     }
/// }
///
/// let session = Deferred<String>()
/// finishLogin(session, token: "abc")
/// finishLogin(session, token: "def")  // prints the message: the first token stays
/// ```
///
/// A promise may be noncopyable, as ``DeferredAttempt`` is; generic code that takes any promise
/// says so with `some PromiseProtocol<Value> & ~Copyable` and borrows it.
public protocol PromiseProtocol<Value>: Sendable, ~Copyable {
    /// The type of the value.
    associatedtype Value: Sendable

    /// Creates an unfilled promise.
    init()

    /// Whether the promise has been filled.
    var isFilled: Bool { get }

    /// Fills the promise with `value` unless it is filled already.
    ///
    /// Of any number of racing calls exactly one returns `true`, and every reader sees its
    /// value. A call that returns `false` changes nothing.
    ///
    /// - Parameter value: The value to deliver to every reader.
    /// - Returns: `true` if this call filled the promise, `false` if it was already filled.
    @discardableResult
    func fill(with value: Value) -> Bool
}

extension PromiseProtocol where Self: ~Copyable {
    /// Fills the promise with `value`, stopping the program if it is already filled.
    ///
    /// Use it where a second fill would be a logic error. The trap names the promise's type
    /// and the call site, in debug and release builds alike.
    ///
    /// - Parameters:
    ///   - value: The value to deliver to every reader.
    ///   - file: The file named in the trap message; the caller's by default.
    ///   - line: The line named in the trap message; the caller's by default.
    public func mustFill(with value: Value, file: StaticString = #fileID, line: UInt = #line) {
        if !fill(with: value) {
            fatalError(
                "\(Self.self) was already filled; mustFill(with:) called at \(file):\(line)", file: file, line: line)
        }
    }
}

extension PromiseProtocol where Self: ~Copyable, Value == Void {
    /// Fills a promise that carries no value, signalling that the event happened.
    ///
    /// - Returns: `true` if this call filled the promise, `false` if it was already filled.
    @discardableResult
    public func fill() -> Bool {
        fill(with: ())
    }
}
