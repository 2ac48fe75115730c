import Deferred
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

extension StressSuites {
    /// `SharedAttempts` in a storm: 64 threads ask for a few keys, cancel half of what they asked
    /// for and finish the runs in flight, all at once.
    ///
    /// Every caller that kept its attempt gets the success of a run of its key, never a
    /// cancellation; no run that was told to stop delivers; and a run that delivered was the only
    /// one of its key while it ran: the next run of the key started only after it finished.
    @Suite struct SharedAttemptsStormStressTests {
        static let threads = 64
        static let keys = 8
        /// Operations per thread: 200 quick, 10,000 at full size.
        static let operations = TestSize.current.raceRounds / 10

        /// One run of the work, as its producer sees it.
        final class Run: Sendable {
            let key: Int
            let id: Int
            let started: Int
            let writer = HeldWriter<Int, TestError>()
            let stops = Counter()
            /// When its producer began to finish it, or -1.
            let finishing = Atomic<Int>(-1)

            init(key: Int, id: Int, started: Int) {
                self.key = key
                self.id = id
                self.started = started
                writer.onCancel { [stops] in stops.increment() }
            }
        }

        /// The runs, and the clock that orders starts and finishes.
        final class Storm: Sendable {
            let shared = SharedAttempts<Int, Int, TestError>()
            let clock = Atomic<Int>(0)
            let runs = NSLocked<[Run]>([])
            /// The runs not yet finished, by key.
            let pending = NSLocked<[[Run]]>(Array(repeating: [], count: SharedAttemptsStormStressTests.keys))
            let asks = Atomic<Int>(0)

            func start(_ key: Int) -> Attempt<Int, TestError> {
                let run = runs.withLock { runs in
                    runs.append(
                        Run(key: key, id: runs.count, started: clock.wrappingAdd(1, ordering: .relaxed).oldValue))
                    return runs[runs.count - 1]
                }
                pending.withLock { $0[key].append(run) }
                return run.writer.attempt
            }

            /// Finishes the oldest unfinished run of `key`, if any.
            func finishOne(of key: Int) {
                guard let run = pending.withLock({ $0[key].isEmpty ? nil : $0[key].removeFirst() }) else {
                    return
                }
                run.finishing.store(clock.wrappingAdd(1, ordering: .relaxed).oldValue, ordering: .relaxed)
                run.writer.succeed(with: run.id)
            }
        }

        @Test(.timeLimit(.minutes(5)))
        func oneRunPerKeyAtATimeAndOnlyUnwantedRunsCancelled() async {
            let storm = Storm()
            let kept = NSLocked<[(key: Int, attempt: Attempt<Int, TestError>)]>([])
            let gate = DispatchGroup()
            let finished = DispatchGroup()
            gate.enter()
            for thread in 0..<Self.threads {
                finished.enter()
                Thread {
                    var random = SplitMix(seed: TestSize.seed &+ UInt64(thread))
                    var mine: [(key: Int, attempt: Attempt<Int, TestError>)] = []
                    gate.wait()
                    for _ in 0..<Self.operations {
                        let key = Int.random(in: 0..<Self.keys, using: &random)
                        if Int.random(in: 0..<4, using: &random) == 0 {
                            storm.finishOne(of: key)
                            continue
                        }
                        storm.asks.add(1, ordering: .relaxed)
                        let attempt = storm.shared.attempt(for: key, start: storm.start)
                        if Bool.random(using: &random) {
                            attempt.cancel()
                        } else {
                            mine.append((key, attempt))
                        }
                    }
                    kept.withLock { $0.append(contentsOf: mine) }
                    finished.leave()
                }.start()
            }
            gate.leave()
            finished.wait()
            for key in 0..<Self.keys {
                while storm.pending.withLock({ !$0[key].isEmpty }) {
                    storm.finishOne(of: key)
                }
            }

            let runs = storm.runs.withLock { $0 }
            let callers = kept.withLock { $0 }
            var delivered = Set<Int>()
            var wrong = 0
            for caller in callers {
                let result = caller.attempt.value(within: 60)
                guard case .success(let id) = result, runs[id].key == caller.key else {
                    print("caller of key \(caller.key) got \(String(describing: result))")
                    wrong += 1
                    continue
                }
                delivered.insert(id)
            }
            #expect(
                wrong == 0, "\(wrong) of \(callers.count) callers that kept their attempt got no success of their key")
            let stoppedAndDelivered = runs.filter { $0.stops.value > 0 && delivered.contains($0.id) }.count
            #expect(stoppedAndDelivered == 0, "a run told to stop while a caller still wanted it")
            #expect(runs.allSatisfy { $0.stops.value <= 1 }, "a run told to stop twice")
            var overlapping = 0
            for key in 0..<Self.keys {
                let ofKey = runs.filter { $0.key == key }.sorted { $0.started < $1.started }
                for (run, next) in zip(ofKey, ofKey.dropFirst()) where delivered.contains(run.id) {
                    if next.started < run.finishing.load(ordering: .relaxed) {
                        overlapping += 1
                    }
                }
            }
            #expect(overlapping == 0, "a run started while a run of its key that delivered was in flight")
            #expect(storm.shared.count == 0, "every key forgotten once its runs ended")

            let asks = storm.asks.load(ordering: .relaxed)
            let stopped = runs.filter { $0.stops.value > 0 }.count
            progress(
                "shared attempts storm: \(asks) asks, \(runs.count) runs (\(asks - runs.count) joins), \(stopped) cancelled for lack of callers, \(delivered.count) delivered"
            )
            #expect(asks - runs.count > 0, "callers joined runs in flight")
            #expect(stopped > 0, "runs were cancelled when every caller left")
        }
    }
}

/// A value behind an `NSLock`, which ThreadSanitizer understands (it reports false races through
/// `Synchronization.Mutex` on Linux when threads contend, as 64 threads here do).
final class NSLocked<Value>: @unchecked Sendable {
    // `@unchecked Sendable` is sound: `value` is touched only while `lock` is held.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<Result>(_ body: (inout Value) -> Result) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}
