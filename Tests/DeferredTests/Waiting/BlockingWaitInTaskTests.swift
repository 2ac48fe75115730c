import Deferred
import Dispatch
import Foundation
import TestSupport
import Testing

/// Debug builds warn, once per call site, when a blocking wait blocks a Swift task's thread off
/// the main thread; a wait that does not block, or blocks a plain thread, says nothing.
@Suite struct BlockingWaitInTaskTests {
    /// Blocks twice at one call site on values that come 20 ms later, and once on a filled value;
    /// returns the line of the call site. (Synchronous code: `wait` is unavailable in async code.)
    static func waitTwiceAtOneCallSite() -> UInt {
        let line: UInt = #line + 4
        for _ in 0..<2 {
            let value = Deferred<Int>()
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) { value.fill(with: 1) }
            _ = value.wait(for: .seconds(10))
        }
        _ = Deferred<Int>(filledWith: 1).wait(for: .seconds(10))  // filled: nothing blocks
        return line
    }

    #if EXIT_TESTS
        @Test func aWaitThatBlocksATaskWarnsOnceNamingItsCallSite() async {
            let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
                // A detached task runs on the global pool, off the main thread.
                let line = await Task.detached { Self.waitTwiceAtOneCallSite() }.value
                // The same waits on a plain thread: no task, no warning.
                let thread = Thread { _ = Self.waitTwiceAtOneCallSite() }
                thread.start()
                while !thread.isFinished { usleep(1_000) }
                print("line \(line)")
                endExitTest(passed: true)
            }
            guard let output = result.map({ String(decoding: $0.standardOutputContent, as: UTF8.self) }) else {
                return
            }
            let lines = output.split(separator: "\n")
            let warnings = lines.filter { $0.contains("Deferred: warning: a blocking wait") }
            #if !DEBUG
                #expect(warnings.isEmpty, "release builds never warn")
            #else
                #expect(warnings.count == 1, "once per call site, and only in the task: \(output)")
                let line = lines.first { $0.hasPrefix("line ") }?.dropFirst(5) ?? "?"
                #expect(
                    warnings.first?.contains("DeferredTests/BlockingWaitInTaskTests.swift:\(line)") == true,
                    "the warning names the call site: \(output)")
            #endif
        }
    #endif
}
