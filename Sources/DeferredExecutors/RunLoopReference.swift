import CoreFoundation
import Foundation

/// A Core Foundation run loop, with the operations on it that any thread may call.
///
/// `@unchecked Sendable` is sound because this type exposes only `CFRunLoopPerformBlock`,
/// `CFRunLoopWakeUp`, `CFRunLoopAddTimer` and `CFRunLoopStop`, which Core Foundation documents
/// as safe to call on another thread's run loop (it locks the run loop internally), and a
/// comparison with `CFRunLoopGetCurrent()`, which reads only the calling thread's state and the
/// reference's identity; the run loop itself is only ever run by its own thread. `CFRunLoop` is not marked `Sendable` on
/// this toolchain, which is the only reason for the annotation.
struct RunLoopReference: @unchecked Sendable {
    /// The run loop.
    let runLoop: CFRunLoop

    /// Whether bodies run in the common modes (`true`) or only the default mode.
    let inCommonModes: Bool

    /// The mode or mode set bodies are scheduled in.
    private var mode: CFRunLoopMode {
        inCommonModes ? kCFRunLoopCommonModes : kCFRunLoopDefaultMode
    }

    /// Whether this is the calling thread's run loop.
    var isCurrent: Bool {
        CFRunLoopGetCurrent() === runLoop
    }

    /// Runs `body` on the run loop's next turn, waking it if it sleeps.
    func perform(_ body: @escaping @Sendable () -> Void) {
        #if canImport(Darwin)
            // Darwin's CFRunLoopMode is a struct around the CFString this CFTypeRef parameter takes.
            CFRunLoopPerformBlock(runLoop, mode.rawValue, body)
        #else
            CFRunLoopPerformBlock(runLoop, mode, body)
        #endif
        CFRunLoopWakeUp(runLoop)
    }

    /// Runs `body` on the run loop once `delay` has passed.
    func perform(after delay: Duration, _ body: @escaping @Sendable () -> Void) {
        let fireDate =
            CFAbsoluteTimeGetCurrent() + Double(delay.components.seconds)
            + Double(delay.components.attoseconds) / 1e18
        let timer = CFRunLoopTimerCreateWithHandler(nil, fireDate, 0, 0, 0) { _ in body() }
        CFRunLoopAddTimer(runLoop, timer, mode)
    }

    /// Makes the run loop's current `run` call return.
    func stop() {
        CFRunLoopStop(runLoop)
    }
}
