import BenchmarkScenarios
import Foundation
import MallocInterposerSwift
import Synchronization

/// What one measured run of a trial cost.
struct Measurement {
    /// Wall-clock time of the measured work.
    var duration: Duration
    /// Heap allocations made while it ran, on every thread.
    var allocations: Int
    /// Heap bytes those allocations take from glibc's allocator, block headers and rounding
    /// included (computed from the requested sizes, so the interposer's own overhead is left out).
    var blockBytes: Int
}

/// The glibc block bytes of the allocations counted so far; see ``countBlock(_:)``.
private let blockBytes = Atomic<Int>(0)

/// Adds the size of the block glibc's allocator uses for a request of `size` bytes on a 64-bit
/// system: the request plus an 8-byte header, rounded up to 16, and at least 32.
private func countBlock(_ size: Int) {
    blockBytes.wrappingAdd(max(32, (size + 8 + 15) & ~15), ordering: .relaxed)
}

/// What a timed run took: wall-clock time and the processor time of the whole process.
struct Timing {
    var wall: Duration
    var processor: Duration
}

/// Times `trial` without counting allocations.
func time(_ trial: Trial) -> Timing {
    let clock = ContinuousClock()
    let startProcessor = processorTime()
    let start = clock.now
    trial.measured()
    let wall = clock.now - start
    return Timing(wall: wall, processor: processorTime() - startProcessor)
}

/// The processor time this process has used so far, user and system, on every thread.
func processorTime() -> Duration {
    var usage = rusage()
    #if os(Linux)
        // Glibc imports RUSAGE_SELF as an enum case; Darwin as the Int32 that getrusage takes.
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    #else
        getrusage(RUSAGE_SELF, &usage)
    #endif
    let microseconds =
        (Int64(usage.ru_utime.tv_sec) + Int64(usage.ru_stime.tv_sec)) * 1_000_000
        + Int64(usage.ru_utime.tv_usec) + Int64(usage.ru_stime.tv_usec)
    return .microseconds(microseconds)
}

/// Keeps both cores busy with two other processes while `body` runs, for the scenarios that
/// measure waiting on a loaded machine.
func withBusyCores<Result>(_ body: () -> Result) -> Result {
    let spinners = (0..<2).map { _ in
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "while :; do :; done"]
        try? process.run()
        return process
    }
    defer {
        for spinner in spinners {
            spinner.terminate()
            spinner.waitUntilExit()
        }
    }
    return body()
}

/// Runs `trial` once with allocation counting on.
///
/// Counting slows each allocation down, so timings come from separate runs of ``time(_:)``.
func countAllocations(_ trial: Trial) -> Measurement {
    MallocInterposerSwift.initialize()
    blockBytes.store(0, ordering: .relaxed)
    MallocInterposerSwift.setAllocationHook(countBlock)
    let clock = ContinuousClock()
    MallocInterposerSwift.hook()
    let start = clock.now
    trial.measured()
    let duration = clock.now - start
    MallocInterposerSwift.unhook()
    MallocInterposerSwift.setAllocationHook(nil)
    let statistics = MallocInterposerSwift.getStatistics()
    return Measurement(
        duration: duration,
        allocations: statistics.mallocCount,
        blockBytes: blockBytes.load(ordering: .relaxed)
    )
}

/// Counts the allocations `body` makes, on every thread.
func allocations(of body: () -> Void) -> Int {
    MallocInterposerSwift.initialize()
    MallocInterposerSwift.hook()
    body()
    MallocInterposerSwift.unhook()
    return MallocInterposerSwift.getStatistics().mallocCount
}
