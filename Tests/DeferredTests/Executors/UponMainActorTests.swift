import Deferred
import TestSupport
import Testing

/// `uponMainActor` is the future's own, whatever the static type: generic code over
/// `some FutureProtocol` or `any FutureProtocol` gets an attempt's withdrawal on `cancel()`, and
/// every value of other futures.
@MainActor
@Suite struct UponMainActorTests {
    /// How generic code reaches the future.
    enum Access: CaseIterable, Sendable {
        case concrete, some, any
    }

    /// Asks for `future`'s value on the main actor through `access`.
    static func deliver<F: FutureProtocol>(
        _ future: F, through access: Access, _ body: @escaping @MainActor @Sendable (F.Value) -> Void
    ) {
        switch access {
        case .concrete: future.uponMainActor(execute: body)
        case .some: viaSome(future, body)
        case .any: viaAny(future, body)
        }
    }

    static func viaSome<Value>(
        _ future: some FutureProtocol<Value>, _ body: @escaping @MainActor @Sendable (Value) -> Void
    ) {
        future.uponMainActor(execute: body)
    }

    static func viaAny<Value>(
        _ future: any FutureProtocol<Value>, _ body: @escaping @MainActor @Sendable (Value) -> Void
    ) {
        future.uponMainActor(execute: body)
    }

    /// Returns once every main-actor delivery submitted before the call has run: the main actor
    /// runs them in the order they were submitted.
    static func flushMainActor() async {
        await withCheckedContinuation { continuation in
            Future(filledWith: ()).uponMainActor { continuation.resume() }
        }
    }

    @Test(arguments: Access.allCases)
    func aCancelledAttemptNeverDeliversThroughGenericCode(_ access: Access) async {
        let writer = DeferredAttempt<Int, TestError>()
        let delivered = Counter()
        Self.deliver(writer.attempt, through: access) { _ in delivered.increment() }
        writer.succeed(with: 1)  // the delivery waits for the main actor, which this test holds
        writer.attempt.cancel()
        await Self.flushMainActor()
        #expect(delivered.value == 0, "cancel() withdrew the stale result")
    }

    @Test(arguments: Access.allCases)
    func anAttemptThatIsNotCancelledDeliversThroughGenericCode(_ access: Access) async {
        let writer = DeferredAttempt<Int, TestError>()
        let delivered = Counter()
        Self.deliver(writer.attempt, through: access) { _ in delivered.increment() }
        writer.succeed(with: 1)
        await Self.flushMainActor()
        #expect(delivered.value == 1)
    }

    @Test(arguments: Access.allCases)
    func deferredAndFutureDeliverEveryValueThroughGenericCode(_ access: Access) async {
        let deferred = Deferred<Int>()
        let delivered = Counter()
        Self.deliver(deferred, through: access) { _ in delivered.increment() }
        Self.deliver(Future(deferred), through: access) { _ in delivered.increment() }
        Self.deliver(deferred.ignored(), through: access) { _ in delivered.increment() }
        deferred.fill(with: 1)
        await Self.flushMainActor()
        #expect(delivered.value == 3)
    }
}
