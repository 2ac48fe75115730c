import Deferred
import Dispatch
import TestSupport
import Testing

@Suite struct DebuggingTests {
    @Test func theDebugDescriptionShowsTheStateAndValue() {
        let deferred = Deferred<Int>()
        #expect(deferred.debugDescription == "Deferred(unfilled)")
        deferred.fill(with: 42)
        #expect(deferred.debugDescription == "Deferred(filled: 42)")
        #expect(Future(filledWith: "hi").debugDescription == "Future(filled: \"hi\")")
        #expect(Future<Int>.never.debugDescription == "Future(unfilled)")
        #expect(deferred.ignored().debugDescription == "IgnoringFuture(filled: ())")
        #expect(deferred.lazy.map { $0 + 1 }.debugDescription == "LazyMapFuture(filled: 43)")
        #expect(String(reflecting: deferred) == "Deferred(filled: 42)")
    }

    @Test func theMirrorShowsWhetherItIsFilledAndTheValue() {
        let deferred = Deferred<Int>()
        let unfilled = Mirror(reflecting: deferred)
        #expect(unfilled.displayStyle == .struct)
        #expect(unfilled.children.first?.label == "isFilled")
        #expect(unfilled.children.first?.value as? Bool == false)
        #expect(unfilled.children.count == 1)
        deferred.fill(with: 5)
        let filled = Mirror(reflecting: deferred)
        let children = Dictionary(uniqueKeysWithValues: filled.children.map { ($0.label ?? "", $0.value) })
        #expect(children["isFilled"] as? Bool == true)
        #expect(children["value"] as? Int == 5)
    }
}
