import Foundation
import TestSupport
import Testing

/// The stack-safety tests can fail: at the depth and on the stack of the run's size (see
/// ``TestSize``), each of the two recursions they exist to catch overflows the stack, while the
/// same code at a hundredth of the depth runs to the end.
///
/// - A **recursive release**: each closure of a chain holds the one before it, so dropping the
///   last releases the chain with one nested call per level. It is what dropping an unfilled
///   chain of futures would do without the release loop.
/// - A **recursive drain**: filling a stage runs its handler inline, and the handler fills the
///   next stage. It is what filling a chain on the immediate executor would do without a drain
///   queue.
///
/// Each runs in a child process (an exit test), since the overflow ends the process.
@Suite struct StackSafetyCalibrationTests {
    #if EXIT_TESTS  // a test in a child process; see testSwiftSettings in Package.swift
        @Test func aRecursiveReleaseAsDeepAsTheStackSafetyTestsOverflowsTheirStack() async {
            let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
                await onDeepStack("calibration: recursive release") {
                    releaseRecursively(depth: TestSize.current.depth)
                }
                endExitTest(passed: true)
            }
            progress("calibration: a recursive release \(TestSize.current.depth) deep ended with \(describe(result))")
            #expect(overflowedItsStack(result), "the child ended by overflowing its stack, not otherwise")
        }

        @Test func aRecursiveDrainAsDeepAsTheStackSafetyTestsOverflowsTheirStack() async {
            let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
                _ = await onDeepStack("calibration: recursive drain") {
                    drainRecursively(depth: TestSize.current.depth)
                }
                endExitTest(passed: true)
            }
            progress("calibration: a recursive drain \(TestSize.current.depth) deep ended with \(describe(result))")
            #expect(overflowedItsStack(result), "the child ended by overflowing its stack, not otherwise")
        }

        @Test func bothRecursionsAtAHundredthOfTheDepthFitTheStack() async {
            await #expect(processExitsWith: .success) {
                let filled = await onDeepStack("calibration: both recursions, a hundredth as deep") {
                    releaseRecursively(depth: TestSize.current.depth / 100)
                    return drainRecursively(depth: TestSize.current.depth / 100)
                }
                endExitTest(passed: filled == TestSize.current.depth / 100)
            }
        }
    #endif
}

/// Builds a chain of `depth` closures, each holding the one before it, and drops it: the release
/// recurses once per level.
private func releaseRecursively(depth: Int) {
    var tail: () -> Int = { 0 }
    for _ in 0..<depth {
        let before = tail
        tail = { before() + 1 }
    }
    blackHole(tail)
}

/// A future without a drain queue: filling it runs its handler at once, on the filling thread.
private final class NaiveFuture {
    var value: Int?
    var handler: ((Int) -> Void)?

    func fill(with value: Int) {
        self.value = value
        handler?(value)
    }
}

/// Builds `depth` naive futures, each filling the next from its handler, fills the first and
/// returns the value of the last: the fill recurses once per level. (The handlers hold the next
/// stage unowned and an array holds the stages, so the release does not recurse.)
private func drainRecursively(depth: Int) -> Int? {
    let stages = (0...depth).map { _ in NaiveFuture() }
    for (stage, next) in zip(stages, stages.dropFirst()) {
        stage.handler = { [unowned next] value in next.fill(with: value + 1) }
    }
    stages[0].fill(with: 0)
    return stages[depth].value
}

/// Whether an exit test's child ended by overflowing its stack: killed by the signal of an access
/// to the guard page below the stack (`SIGSEGV`; `SIGBUS` on some Apple systems), or, under
/// AddressSanitizer, which catches that signal itself, with its report of a stack overflow.
private func overflowedItsStack(_ result: ExitTest.Result?) -> Bool {
    switch result?.exitStatus {
    case .signal(SIGSEGV), .signal(SIGBUS):
        return true
    case .exitCode:
        let errors = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        return errors.contains("AddressSanitizer: stack-overflow")
    default:
        return false
    }
}

/// How an exit test's child ended, for the log.
private func describe(_ result: ExitTest.Result?) -> String {
    switch result?.exitStatus {
    case .signal(let signal): "signal \(signal)"
    case .exitCode(let code): "exit code \(code)"
    default: "no result"
    }
}
