import BenchmarkScenarios
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

/// Times `trial` without counting allocations.
func time(_ trial: Trial) -> Duration {
    let clock = ContinuousClock()
    let start = clock.now
    trial.measured()
    return clock.now - start
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
