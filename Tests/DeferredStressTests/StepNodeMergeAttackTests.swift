import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

extension StressSuites {
    /// A fresh-eye attack on the merge of the stage nodes (one `StepAttemptNode` for every step, `andThen` and
    /// `fallback` following through it, in place or on an executor; one link path per join; one
    /// delivery helper for `uponSuccess`/`uponFailure`; one waiting path in `get()`), through the
    /// public API only.
    @Suite struct StepNodeMergeAttackTests {
        /// A failure type with no cancellation error that cannot say "abandoned".
        enum Plain: Error, Equatable { case failed(Int) }

        static let rounds = max(200, TestSize.attack.raceRounds / 2)

        /// The serial queue every callback of the races is delivered on, and where the racing
        /// `cancel()` runs: a callback that starts after that `cancel()` returned is late.
        static let callbacks = DispatchQueue(label: "step-node-merge.callbacks")

        /// The serial queue steps run on in the queue variants.
        static let steps = DispatchQueue(label: "step-node-merge.steps")

        enum Kind: String, CaseIterable, Sendable { case andThen, fallback }

        /// Derives the following stage of `kind` from `source`, on the immediate executor or on
        /// ``steps``.
        static func follow(
            _ source: Attempt<Int, TestError>, kind: Kind, inPlace: Bool,
            _ start: @escaping @Sendable (Result<Int, TestError>) -> Attempt<Int, TestError>
        ) -> Attempt<Int, TestError> {
            switch (kind, inPlace) {
            case (.andThen, true): source.andThen(upon: .immediate) { start(.success($0)) }
            case (.andThen, false): source.andThen(upon: steps) { start(.success($0)) }
            case (.fallback, true): source.fallback(upon: .immediate) { start(.failure($0)) }
            case (.fallback, false): source.fallback(upon: steps) { start(.failure($0)) }
            }
        }

        /// Callbacks of a stage, counted, with a check that none started after the racing
        /// `cancel()` returned (both run on ``callbacks``).
        final class Callbacks: Sendable {
            let successes = Counter()
            let failures = Counter()
            let late = Counter()
            let cancelReturned = Atomic<Bool>(false)
            let lastFailure = Mutex<TestError?>(nil)

            func watch(_ attempt: Attempt<Int, TestError>) {
                attempt.uponSuccess(StepNodeMergeAttackTests.callbacks) { [self] _ in
                    successes.increment()
                    if cancelReturned.load(ordering: .acquiring) { late.increment() }
                }
                attempt.uponFailure(StepNodeMergeAttackTests.callbacks) { [self] error in
                    failures.increment()
                    lastFailure.withLock { $0 = error }
                    if cancelReturned.load(ordering: .acquiring) { late.increment() }
                }
            }

            /// Cancels `attempt` on the callback queue and records that it returned.
            func cancel(_ attempt: Attempt<Int, TestError>) {
                StepNodeMergeAttackTests.callbacks.sync {
                    attempt.cancel()
                    cancelReturned.store(true, ordering: .releasing)
                }
            }
        }

        static func flush() {
            steps.sync {}
            callbacks.sync {}
            steps.sync {}
            callbacks.sync {}
        }

        // MARK: cancel() racing the source's decision

        final class SourceRace: Sendable {
            let source = HeldWriter<Int, TestError>()
            let inner = HeldWriter<Int, TestError>()
            let sourceCancels = Counter()
            let innerCancels = Counter()
            let stepRuns = Counter()
            let live = LiveCount()
            let callbacks = Callbacks()
            let derived: Attempt<Int, TestError>
            let kind: Kind
            /// Whether the source's decision runs the step (a success for `andThen`, a failure
            /// for `fallback`) or passes through.
            let runsStep: Bool

            init(kind: Kind, inPlace: Bool, runsStep: Bool) {
                self.kind = kind
                self.runsStep = runsStep
                source.onCancel { [sourceCancels] in sourceCancels.increment() }
                inner.onCancel { [innerCancels] in innerCancels.increment() }
                let tracked = LifetimeTracked(live)
                derived = StepNodeMergeAttackTests.follow(source.attempt, kind: kind, inPlace: inPlace) {
                    [inner, stepRuns] _ in
                    _ = tracked
                    stepRuns.increment()
                    return inner.attempt
                }
                _ = consume tracked
                callbacks.watch(derived)
            }

            /// The source's decision: `1` or `.failed(1)`.
            var decision: Result<Int, TestError> {
                (kind == .andThen) == runsStep ? .success(1) : .failure(.failed(1))
            }
        }

        @Test(arguments: [true, false], [true, false])
        func cancelRacesSourceDecision(inPlace: Bool, runsStep: Bool) {
            for kind in Kind.allCases {
                let name = "\(kind) inPlace=\(inPlace) runsStep=\(runsStep): cancel vs source"
                RaceHarness.expectInterleavings(
                    name,
                    rounds: Self.rounds,
                    expected: runsStep
                        ? ["cancel stopped the source", "step ran, inner stopped", "source decided, step skipped"]
                        : ["cancel stopped the source", "passed through, then cancel"],
                    setup: { SourceRace(kind: kind, inPlace: inPlace, runsStep: runsStep) },
                    left: { $0.source.fill(with: $0.decision) },
                    right: { $0.callbacks.cancel($0.derived) },
                    classify: { round in
                        Self.flush()
                        return Self.check(round, name)
                    })
            }
        }

        static func check(_ round: SourceRace, _ name: String) -> String {
            let derived = round.derived.peek()
            let source = round.source.peek()
            let inner = round.inner.peek()
            let facts =
                "\(name): derived \(String(describing: derived)) source \(String(describing: source)) inner \(String(describing: inner)) steps \(round.stepRuns.value) sourceCancels \(round.sourceCancels.value) innerCancels \(round.innerCancels.value) live \(round.live.value) callbacks \(round.callbacks.successes.value)/\(round.callbacks.failures.value) late \(round.callbacks.late.value)"
            var ok = true
            func require(_ condition: Bool, _ what: String) {
                if !condition {
                    ok = false
                    Issue.record("\(what): \(facts)")
                }
            }
            require(round.derived.isCancelled, "cancel() was called")
            require(round.callbacks.late.value == 0, "a callback started after cancel() returned")
            require(round.live.value == 0, "the step's captures are released")
            require(round.stepRuns.value <= 1, "the step runs at most once")
            require(round.sourceCancels.value <= 1 && round.innerCancels.value <= 1, "stops are told once")
            require((round.sourceCancels.value == 1) == (source == .failure(.cancelled)), "a stop decides the source")
            require(source == .failure(.cancelled) || source == round.decision, "the source has one decision")
            if source == .failure(.cancelled) {
                require(round.stepRuns.value == 0, "a stopped source runs no step")
                require(derived == .failure(.cancelled), "the cancel won")
                return ok ? "cancel stopped the source" : "bad"
            }
            if !round.runsStep {
                // Passed through: the derived attempt has the source's decision or the cancellation.
                require(derived == round.decision || derived == .failure(.cancelled), "one decision")
                let runs = round.callbacks.successes.value + round.callbacks.failures.value
                require(runs <= 1, "callbacks ran twice")
                if runs == 1 {
                    require(derived == round.decision, "a callback ran for a cancellation")
                    if round.kind == .andThen {
                        require(round.callbacks.lastFailure.withLock { $0 } == .failed(1), "the failure delivered")
                    } else {
                        require(round.callbacks.successes.value == 1, "the success delivered")
                    }
                }
                return ok ? "passed through, then cancel" : "bad"
            }
            require(derived == .failure(.cancelled), "nothing but the cancel decides the stage")
            require(round.callbacks.successes.value == 0, "no success can reach the stage")
            require(round.callbacks.failures.value == 0, "uponFailure for a cancelled stage")
            if round.stepRuns.value == 1 {
                // The stage followed the inner attempt, or found itself cancelled as it moved on:
                // either way nothing else needs the inner attempt, so it was told to stop.
                require(round.innerCancels.value == 1, "the inner attempt the step started was not stopped")
                require(inner == .failure(.cancelled), "the inner attempt is cancelled")
                return ok ? "step ran, inner stopped" : "bad"
            }
            require(round.innerCancels.value == 0, "no step ran, yet the inner attempt was stopped")
            return ok ? "source decided, step skipped" : "bad"
        }

        // MARK: cancel() racing the inner attempt's decision

        final class InnerRace: Sendable {
            let inner = HeldWriter<Int, TestError>()
            let innerCancels = Counter()
            let stepRuns = Counter()
            let live = LiveCount()
            let callbacks = Callbacks()
            let derived: Attempt<Int, TestError>
            let innerResult: Result<Int, TestError>

            init(kind: Kind, inPlace: Bool, innerFails: Bool) {
                innerResult = innerFails ? .failure(.failed(5)) : .success(5)
                inner.onCancel { [innerCancels] in innerCancels.increment() }
                let source: Attempt<Int, TestError> =
                    kind == .andThen ? Attempt(succeededWith: 1) : Attempt(failedWith: .failed(1))
                let tracked = LifetimeTracked(live)
                derived = StepNodeMergeAttackTests.follow(source, kind: kind, inPlace: inPlace) {
                    [inner, stepRuns] _ in
                    _ = tracked
                    stepRuns.increment()
                    return inner.attempt
                }
                _ = consume tracked
                callbacks.watch(derived)
            }
        }

        @Test(arguments: [true, false], [false, true])
        func cancelRacesInnerDecision(inPlace: Bool, innerFails: Bool) {
            for kind in Kind.allCases {
                let name = "\(kind) inPlace=\(inPlace) innerFails=\(innerFails): cancel vs inner"
                RaceHarness.expectInterleavings(
                    name,
                    rounds: Self.rounds,
                    // On a queue the step may also not have run when the cancel comes (rare: it is
                    // submitted as the stage is made); that counts with the inner attempt stopped.
                    expected: [
                        "inner decided first", "cancel first, inner stopped", "cancel first, inner won its own race",
                    ],
                    setup: { InnerRace(kind: kind, inPlace: inPlace, innerFails: innerFails) },
                    left: { $0.inner.fill(with: $0.innerResult) },
                    right: { $0.callbacks.cancel($0.derived) },
                    classify: { round in
                        Self.flush()
                        let derived = round.derived.peek()
                        let inner = round.inner.peek()
                        let facts =
                            "\(name): derived \(String(describing: derived)) inner \(String(describing: inner)) steps \(round.stepRuns.value) innerCancels \(round.innerCancels.value) live \(round.live.value) callbacks \(round.callbacks.successes.value)/\(round.callbacks.failures.value) late \(round.callbacks.late.value)"
                        var ok = true
                        func require(_ condition: Bool, _ what: String) {
                            if !condition {
                                ok = false
                                Issue.record("\(what): \(facts)")
                            }
                        }
                        require(round.derived.isCancelled, "cancel() was called")
                        require(round.callbacks.late.value == 0, "a callback started after cancel() returned")
                        require(round.live.value == 0, "the step's captures are released")
                        require(round.stepRuns.value <= 1, "the step runs at most once")
                        require(round.innerCancels.value <= 1, "a stop is told once")
                        require(
                            (round.innerCancels.value == 1) == (inner == .failure(.cancelled)),
                            "a stop decides the inner attempt")
                        require(
                            round.callbacks.successes.value + round.callbacks.failures.value <= 1,
                            "one callback at most")
                        if derived == round.innerResult {
                            require(round.stepRuns.value == 1, "the inner result came through the step")
                            require(inner == round.innerResult, "the inner attempt decided")
                            if innerFails {
                                require(round.callbacks.successes.value == 0, "uponSuccess for a failure")
                            } else {
                                require(round.callbacks.failures.value == 0, "uponFailure for a success")
                            }
                            return ok ? "inner decided first" : "bad"
                        }
                        require(derived == .failure(.cancelled), "the stage has one of the two results")
                        require(
                            round.callbacks.successes.value + round.callbacks.failures.value == 0,
                            "a callback for a cancelled stage")
                        if round.stepRuns.value == 0 {
                            require(!inPlace, "an in-place step on a finished source runs as the stage is made")
                            require(round.innerCancels.value == 0, "no step ran, yet the inner attempt was stopped")
                            return ok ? "cancel first, inner stopped" : "bad"
                        }
                        if inner == .failure(.cancelled) {
                            return ok ? "cancel first, inner stopped" : "bad"
                        }
                        require(inner == round.innerResult, "inner has one of the two results")
                        return ok ? "cancel first, inner won its own race" : "bad"
                    })
            }
        }

        // MARK: Deep chains

        /// What one level of a mixed chain does to a result.
        static func model(_ result: Result<Int, TestError>, level: Int) -> Result<Int, TestError> {
            switch level % 7 {
            case 0: result.map { $0 + 1 }
            case 3: if case .failure = result { .success(-1) } else { result }
            default: result
            }
        }

        /// Appends `depth` levels mixing `map`, `andThen`, `fallback`, `recover`, a `mapError`
        /// there and back, and stages that follow the chain so far from a finished attempt, each
        /// capturing a tracked object; on the immediate executor or, if `queue` is given, there.
        static func mixedChain(
            on root: Attempt<Int, TestError>, depth: Int, live: LiveCount, queue: DispatchQueue? = nil
        ) -> Attempt<Int, TestError> {
            var tail = root
            for level in 0..<depth {
                let tracked = LifetimeTracked(live)
                switch (level % 7, queue) {
                case (0, nil):
                    tail = tail.map(upon: .immediate) {
                        _ = tracked
                        return $0 + 1
                    }
                case (0, let queue?):
                    tail = tail.map(upon: queue) {
                        _ = tracked
                        return $0 + 1
                    }
                case (1, nil):
                    tail = tail.andThen(upon: .immediate) { value in
                        _ = tracked
                        return Attempt(succeededWith: value)
                    }
                case (1, let queue?):
                    tail = tail.andThen(upon: queue) { value in
                        _ = tracked
                        return Attempt(succeededWith: value)
                    }
                case (2, nil):
                    tail = tail.fallback(upon: .immediate) { error in
                        _ = tracked
                        return Attempt(failedWith: error)
                    }
                case (2, let queue?):
                    tail = tail.fallback(upon: queue) { error in
                        _ = tracked
                        return Attempt(failedWith: error)
                    }
                case (3, nil):
                    tail = tail.recover(upon: .immediate) { _ in
                        _ = tracked
                        return -1
                    }
                case (3, let queue?):
                    tail = tail.recover(upon: queue) { _ in
                        _ = tracked
                        return -1
                    }
                case (4, nil):
                    tail = tail.mapError(upon: .immediate) {
                        _ = tracked
                        return WrappedTestError.wrapped($0)
                    }
                    .mapError(upon: .immediate) { $0.unwrapped }
                case (4, let queue?):
                    tail = tail.mapError(upon: queue) {
                        _ = tracked
                        return WrappedTestError.wrapped($0)
                    }
                    .mapError(upon: queue) { $0.unwrapped }
                case (5, _):
                    // Follows the chain so far at once: its step runs in place as it is made.
                    let previous = tail
                    tail = Attempt<Int, TestError>(succeededWith: 0).andThen(upon: .immediate) { _ in
                        _ = tracked
                        return previous
                    }
                default:
                    let previous = tail
                    tail = Attempt<Int, TestError>(failedWith: .failed(0)).fallback(upon: .immediate) { _ in
                        _ = tracked
                        return previous
                    }
                }
                _ = consume tracked
            }
            return tail
        }

        struct DeepOutcome: Sendable {
            var tail: Result<Int, TestError>?
            var root: Result<Int, TestError>?
            var expected: Result<Int, TestError>?
            var liveBefore = 0
            var liveAfter = 0
            var rootCancels = 0
            var handlerRuns = 0
            var tailCancelled = false
        }

        @Test(.skippedUnderThreadSanitizer, arguments: ["cancel tail", "succeed", "fail", "orphan root"])
        func deepMixedChainOnTheImmediateExecutor(ending: String) async {
            let depth = TestSize.attack.depth
            let outcome = await onDeepStack("mixed chain, \(ending)", size: .attack) { () -> DeepOutcome in
                var outcome = DeepOutcome()
                let live = LiveCount()
                let cancels = Counter()
                let runs = Counter()
                var writer: HeldWriter<Int, TestError>? = HeldWriter<Int, TestError>()
                writer!.onCancel { cancels.increment() }
                let root = writer!.attempt
                let tail = StepNodeMergeAttackTests.mixedChain(on: root, depth: depth, live: live)
                let handler = LifetimeTracked(live)
                tail.upon(.immediate) { _ in
                    _ = handler
                    runs.increment()
                }
                _ = consume handler
                outcome.liveBefore = live.value
                switch ending {
                case "cancel tail":
                    tail.cancel()
                    outcome.expected = .failure(.cancelled)
                case "succeed":
                    writer!.succeed(with: 0)
                    outcome.expected = (0..<depth).reduce(.success(0)) { StepNodeMergeAttackTests.model($0, level: $1) }
                case "fail":
                    writer!.fail(with: .failed(9))
                    outcome.expected = (0..<depth).reduce(.failure(.failed(9))) {
                        StepNodeMergeAttackTests.model($0, level: $1)
                    }
                default:
                    writer = nil
                    outcome.expected = nil
                }
                outcome.tail = tail.peek()
                outcome.root = root.peek()
                outcome.tailCancelled = tail.isCancelled
                outcome.liveAfter = live.value
                outcome.rootCancels = cancels.value
                outcome.handlerRuns = runs.value
                _ = writer
                return outcome
            }
            #expect(outcome.liveBefore > depth / 2, "\(ending): captures were alive")
            #expect(outcome.tail == outcome.expected, "\(ending): tail")
            #expect(outcome.liveAfter == 0, "\(ending): \(outcome.liveAfter) captures still alive")
            #expect(outcome.handlerRuns == (outcome.expected == nil ? 0 : 1), "\(ending): handler runs")
            if ending == "cancel tail" {
                #expect(outcome.rootCancels == 1, "the producer was told to stop")
                #expect(outcome.root == .failure(.cancelled))
                #expect(outcome.tailCancelled)
            } else {
                #expect(outcome.rootCancels == 0)
            }
        }

        /// The same chain with every step on a serial queue, cancelled at the end before any
        /// step could run (the root is pending), and once the root decided with the steps queued.
        @Test(.skippedUnderThreadSanitizer, arguments: [false, true])
        func deepMixedChainOnAQueueCancelledAtTheEnd(rootSucceedsFirst: Bool) async {
            let depth = TestSize.attack.depth
            let queue = DispatchQueue(label: "step-node-merge.deep")
            let outcome = await onDeepStack(
                "mixed chain on a queue, cancel, root first \(rootSucceedsFirst)", size: .attack
            ) {
                () -> DeepOutcome in
                var outcome = DeepOutcome()
                let live = LiveCount()
                let cancels = Counter()
                let runs = Counter()
                let writer = HeldWriter<Int, TestError>()
                writer.onCancel { cancels.increment() }
                // The queue is held while the chain is made and cancelled: no step runs meanwhile.
                let gate = DispatchSemaphore(value: 0)
                queue.async { gate.wait() }
                let tail = StepNodeMergeAttackTests.mixedChain(
                    on: writer.attempt, depth: depth, live: live, queue: queue)
                tail.upon(.immediate) { _ in runs.increment() }
                outcome.liveBefore = live.value
                if rootSucceedsFirst {
                    writer.succeed(with: 0)
                }
                tail.cancel()
                gate.signal()
                queue.sync {}
                outcome.tail = tail.peek()
                outcome.root = writer.peek()
                outcome.liveAfter = live.value
                outcome.rootCancels = cancels.value
                outcome.handlerRuns = runs.value
                return outcome
            }
            #expect(outcome.tail == .failure(.cancelled))
            #expect(outcome.handlerRuns == 1)
            #expect(outcome.liveAfter == 0, "\(outcome.liveAfter) captures still alive")
            #expect(outcome.rootCancels == (rootSucceedsFirst ? 0 : 1))
            #expect(outcome.root == (rootSucceedsFirst ? .success(0) : .failure(.cancelled)))
        }

        /// 20,000 stages each following the one before through a finished attempt (every one of
        /// them a following node whose step ran): cancel the last, or finish the first.
        @Test(.skippedUnderThreadSanitizer, arguments: ["cancel", "succeed", "orphan", "abandon"])
        func deepFollowingChain(ending: String) async {
            let depth = TestSize.attack.depth
            let outcome = await onDeepStack("following chain, \(ending)", size: .attack) { () -> [String] in
                var problems: [String] = []
                let live = LiveCount()
                let cancels = Counter()
                let runs = Counter()
                if ending == "abandon" {
                    var writer: HeldWriter<Int, any Error>? = HeldWriter<Int, any Error>()
                    var tail = writer!.attempt
                    for level in 0..<depth {
                        let previous = tail
                        let tracked = LifetimeTracked(live)
                        tail =
                            level.isMultiple(of: 2)
                            ? Attempt<Int, any Error>(succeededWith: 0).andThen(upon: .immediate) { _ in
                                _ = tracked
                                return previous
                            }
                            : Attempt<Int, any Error>(failedWith: Plain.failed(0)).fallback(upon: .immediate) { _ in
                                _ = tracked
                                return previous
                            }
                    }
                    tail.upon(.immediate) { _ in runs.increment() }
                    writer = nil
                    if case .failure(let error) = tail.peek(), error is AbandonedError {
                    } else {
                        problems.append("tail \(String(describing: tail.peek())), not abandoned")
                    }
                    if runs.value != 1 { problems.append("handler ran \(runs.value) times") }
                    if live.value != 0 { problems.append("\(live.value) captures alive") }
                    _ = writer
                    return problems
                }
                var writer: HeldWriter<Int, TestError>? = HeldWriter<Int, TestError>()
                writer!.onCancel { cancels.increment() }
                let root = writer!.attempt
                var tail = root
                for level in 0..<depth {
                    let previous = tail
                    let tracked = LifetimeTracked(live)
                    tail =
                        level.isMultiple(of: 2)
                        ? Attempt<Int, TestError>(succeededWith: 0).andThen(upon: .immediate) { _ in
                            _ = tracked
                            return previous
                        }
                        : Attempt<Int, TestError>(failedWith: .failed(0)).fallback(upon: .immediate) { _ in
                            _ = tracked
                            return previous
                        }
                }
                if live.value != 0 { problems.append("steps ran, but \(live.value) captures alive") }
                let handler = LifetimeTracked(live)
                tail.upon(.immediate) { _ in
                    _ = handler
                    runs.increment()
                }
                _ = consume handler
                switch ending {
                case "cancel":
                    tail.cancel()
                    if tail.peek() != .failure(.cancelled) {
                        problems.append("tail \(String(describing: tail.peek()))")
                    }
                    if root.peek() != .failure(.cancelled) {
                        problems.append("root \(String(describing: root.peek()))")
                    }
                    if cancels.value != 1 { problems.append("producer told to stop \(cancels.value) times") }
                    if runs.value != 1 { problems.append("handler ran \(runs.value) times") }
                case "succeed":
                    writer!.succeed(with: 42)
                    if tail.peek() != .success(42) { problems.append("tail \(String(describing: tail.peek()))") }
                    if cancels.value != 0 { problems.append("producer told to stop") }
                    if runs.value != 1 { problems.append("handler ran \(runs.value) times") }
                default:
                    writer = nil
                    if tail.peek() != nil { problems.append("tail \(String(describing: tail.peek()))") }
                    if runs.value != 0 { problems.append("handler of an orphan ran") }
                    tail.cancel()
                    if !tail.isCancelled || tail.peek() != nil { problems.append("cancel of an orphan") }
                }
                if live.value != 0 { problems.append("\(live.value) captures alive") }
                _ = writer
                return problems
            }
            #expect(outcome.isEmpty, "\(ending): \(outcome)")
        }

        // MARK: Steps dropped unrun

        enum Dropper: String, CaseIterable, Sendable { case manualReleased, threadShutDown }

        /// An executor that will drop what it is given, and the way it drops it.
        final class DroppingExecutor: Sendable {
            let slot: Mutex<ManualExecutor?>
            let thread: ThreadExecutor?
            let executor: Forwarder

            init(_ dropper: Dropper) {
                switch dropper {
                case .manualReleased:
                    let manual = ManualExecutor()
                    slot = Mutex(manual)
                    thread = nil
                    executor = Forwarder(manual: manual, thread: nil)
                case .threadShutDown:
                    let thread = ThreadExecutor(name: "step-node-merge.drop")
                    _ = thread.shutdown().wait(until: .now() + 10)
                    slot = Mutex(nil)
                    self.thread = thread
                    executor = Forwarder(manual: nil, thread: thread)
                }
            }

            /// Drops what the executor holds.
            func drop() {
                let manual = slot.withLock { $0.take() }
                blackHole(manual)
            }
        }

        /// Submits to a manual executor without keeping it (so that releasing the test's
        /// reference releases the executor and the bodies queued on it), or to a thread.
        final class Forwarder: Executor {
            weak let manual: ManualExecutor?
            let thread: ThreadExecutor?
            init(manual: ManualExecutor?, thread: ThreadExecutor?) {
                self.manual = manual
                self.thread = thread
            }
            func submit(_ body: @escaping @Sendable () -> Void) {
                if let manual {
                    manual.submit(body)
                } else {
                    thread?.submit(body)
                }
            }
        }

        @Test(arguments: Dropper.allCases, Kind.allCases)
        func stepDroppedUnrunOrphansTheStage(dropper: Dropper, kind: Kind) {
            for failureType in ["TestError", "Plain", "any Error", "cancelled TestError", "cancelled Plain"] {
                let live = LiveCount()
                let runs = Counter()
                let stepRuns = Counter()
                let dropping = DroppingExecutor(dropper)
                let tracked = LifetimeTracked(live)
                let handler = LifetimeTracked(live)
                let label = "\(dropper) \(kind) \(failureType)"
                func check<F: Error>(_ source: HeldWriter<Int, F>, _ fail: F, cancelFirst: Bool) -> Result<Int, F>?? {
                    let derived: Attempt<Int, F>
                    switch kind {
                    case .andThen:
                        derived = source.attempt.andThen(upon: dropping.executor) { [stepRuns] value in
                            _ = tracked
                            stepRuns.increment()
                            return Attempt(succeededWith: value)
                        }
                    case .fallback:
                        derived = source.attempt.fallback(upon: dropping.executor) { [stepRuns] error in
                            _ = tracked
                            stepRuns.increment()
                            return Attempt(failedWith: error)
                        }
                    }
                    derived.upon(.immediate) { _ in
                        _ = handler
                        runs.increment()
                    }
                    if cancelFirst {
                        // A pending stage whose source is needed elsewhere: the cancel cannot
                        // reach the source, and the step is submitted after the cancel.
                        source.attempt.upon(.immediate) { _ in }
                        derived.cancel()
                    }
                    if kind == .andThen { source.succeed(with: 1) } else { source.fail(with: fail) }
                    dropping.drop()
                    return .some(derived.peek())
                }
                let peeked: String
                var orphaned = false
                switch failureType {
                case "TestError":
                    let result = check(HeldWriter<Int, TestError>(), .failed(1), cancelFirst: false)
                    peeked = "\(String(describing: result))"
                    orphaned = result == .some(nil)
                case "Plain":
                    let result = check(HeldWriter<Int, Plain>(), .failed(1), cancelFirst: false)
                    peeked = "\(String(describing: result))"
                    orphaned = result == .some(nil)
                case "any Error":
                    let result = check(HeldWriter<Int, any Error>(), Plain.failed(1), cancelFirst: false)
                    peeked = "\(String(describing: result))"
                    if case .some(.some(.failure(let error))) = result, error is AbandonedError {
                        orphaned = true  // fails as abandoned, the `any Error` form of it
                    }
                case "cancelled TestError":
                    let result = check(HeldWriter<Int, TestError>(), .failed(1), cancelFirst: true)
                    peeked = "\(String(describing: result))"
                    orphaned = result == .some(.failure(.cancelled))  // decided by the cancel already
                default:
                    let result = check(HeldWriter<Int, Plain>(), .failed(1), cancelFirst: true)
                    peeked = "\(String(describing: result))"
                    // No cancellation error: pending after the cancel, then orphaned, or (for a
                    // fallback) failed as cancelled with the source's failure.
                    orphaned = result == .some(nil) || result == .some(.failure(.failed(1)))
                }
                _ = consume tracked
                _ = consume handler
                #expect(stepRuns.value == 0, "\(label): the step ran")
                #expect(orphaned, "\(label): the stage is \(peeked)")
                #expect(live.value == 0 || runs.value == 1, "\(label): \(live.value) captures alive")
                #expect(live.value == 0, "\(label): \(live.value) captures alive")
                #expect(runs.value <= 1)
                _ = dropping.thread?.shutdown()
            }
        }

        /// Releases the writer in `slot`, whose last reference goes here, before this returns.
        static func lose(_ slot: borrowing Mutex<HeldWriter<Int, TestError>?>) {
            let writer = slot.withLock { $0.take() }
            blackHole(writer)
        }

        /// A cancelled stage whose step an executor drops unrun releases the step at once.
        ///
        /// The stage is cancelled before its source finished (something else needs the source,
        /// so it goes on): the source's success submits the step anyway, and the executor drops
        /// it unrun. The step will never run: its closure, and what it captured, must be released
        /// with the dropped body, while the stage is still referenced. (Found by this attack:
        /// `map` and `recover` kept it, and `andThen` and `fallback` did once they shared the
        /// step node, until the dropped body said whether it had run.)
        @Test(arguments: Dropper.allCases, ["andThen", "fallback", "map", "recover", "mapError"])
        func cancelledStageReleasesItsDroppedStep(dropper: Dropper, kind: String) {
            let live = LiveCount()
            let dropping = DroppingExecutor(dropper)
            let source = HeldWriter<Int, TestError>()
            source.attempt.upon(.immediate) { _ in }  // needs the source for good
            let tracked = LifetimeTracked(live)
            let executor = dropping.executor
            let derived: Attempt<Int, TestError> =
                switch kind {
                case "andThen":
                    source.attempt.andThen(upon: executor) {
                        _ = tracked
                        return Attempt(succeededWith: $0)
                    }
                case "fallback":
                    source.attempt.fallback(upon: executor) {
                        _ = tracked
                        return Attempt(failedWith: $0)
                    }
                case "map":
                    source.attempt.map(upon: executor) {
                        _ = tracked
                        return $0
                    }
                case "recover":
                    source.attempt.recover(upon: executor) { _ in
                        _ = tracked
                        return 0
                    }
                default:
                    source.attempt.mapError(upon: executor) {
                        _ = tracked
                        return WrappedTestError.wrapped($0)
                    }
                    .mapError(upon: .immediate) { $0.unwrapped }
                }
            _ = consume tracked
            derived.cancel()
            #expect(derived.peek() == .failure(.cancelled))
            // The source goes on and finishes; the step, which runs on this result, is submitted.
            if ["andThen", "map"].contains(kind) { source.succeed(with: 1) } else { source.fail(with: .failed(1)) }
            dropping.drop()
            #expect(
                live.value == 0,
                "\(kind) on \(dropper): a cancelled stage whose step was dropped unrun still holds the step's captures")
            #expect(derived.peek() == .failure(.cancelled))
            _ = dropping.thread?.shutdown()
        }

        /// An `andThen` on a queue runs its step, which returns a pending attempt; later, with no
        /// synchronization with the queue, that attempt's writer is dropped (orphaning it): the
        /// stage is orphaned and releases everything. (Run under ThreadSanitizer: the orphaning
        /// thread and the queue's release of the step's body both touch the stage.)
        @Test(arguments: Kind.allCases)
        func followedAttemptOrphanedAfterAQueuedStep(kind: Kind) {
            let queue = DispatchQueue(label: "step-node-merge.orphan-after-step")
            for _ in 0..<200 {
                let live = LiveCount()
                let runs = Counter()
                let stepRan = Counter()
                let inner = Mutex<HeldWriter<Int, TestError>?>(HeldWriter<Int, TestError>())
                let innerAttempt = inner.withLock { $0!.attempt }
                let source: Attempt<Int, TestError> =
                    kind == .andThen ? Attempt(succeededWith: 1) : Attempt(failedWith: .failed(1))
                let derived = Self.followOn(queue, source, kind: kind) { _ in
                    stepRan.increment()
                    return innerAttempt
                }
                let handler = LifetimeTracked(live)
                derived.upon(.immediate) { _ in
                    _ = handler
                    runs.increment()
                }
                _ = consume handler
                while stepRan.value == 0 { RaceHarness.pause(10) }
                RaceHarness.pause(Int.random(in: 0..<2_000))
                Self.lose(inner)
                // The writer may go while the step is still linking the stage to the attempt it
                // returned: the stage is orphaned as it links, on the queue.
                queue.sync {}
                #expect(derived.peek() == nil)
                #expect(runs.value == 0)
                #expect(live.value == 0)
            }
            queue.sync {}
        }

        /// A manual executor that only the stage keeps (the test let go of it before the source
        /// finished): the stage lets go of it as it submits its step, which releases the step
        /// unrun, and orphans the stage.
        @Test(arguments: Kind.allCases)
        func stageLetsGoOfAManualExecutorAsItSubmits(kind: Kind) {
            let live = LiveCount()
            let runs = Counter()
            let stepRuns = Counter()
            let source = HeldWriter<Int, TestError>()
            var manual: ManualExecutor? = ManualExecutor()
            let tracked = LifetimeTracked(live)
            let derived = Self.followOn(manual!, source.attempt, kind: kind) { [stepRuns] result in
                _ = tracked
                stepRuns.increment()
                return Attempt(filledWith: result)
            }
            _ = consume tracked
            let handler = LifetimeTracked(live)
            derived.upon(.immediate) { _ in
                _ = handler
                runs.increment()
            }
            _ = consume handler
            manual = nil
            if kind == .andThen { source.succeed(with: 1) } else { source.fail(with: .failed(1)) }
            #expect(derived.peek() == nil, "orphaned: \(String(describing: derived.peek()))")
            #expect(stepRuns.value == 0 && runs.value == 0)
            #expect(live.value == 0, "\(live.value) captures alive")
            _ = manual
        }

        /// Tasks await an `andThen` stage that follows the attempt its step started; when all
        /// give up, that attempt's producer is told to stop, through the stage.
        @Test(arguments: [true, false])
        func getGivingUpOnAFollowingStageStopsTheInnerProducer(inPlace: Bool) async {
            for tasks in [1, 3] {
                let inner = HeldWriter<Int, TestError>()
                let innerStops = Counter()
                inner.onCancel { innerStops.increment() }
                let stepRan = Counter()
                let derived = Self.follow(Attempt(succeededWith: 1), kind: .andThen, inPlace: inPlace) { _ in
                    stepRan.increment()
                    return inner.attempt
                }
                while stepRan.value == 0 { await Task.yield() }
                let started = Counter()
                let waiters = (0..<tasks).map { _ in
                    Task { () async throws(TestError) -> Int in
                        started.increment()
                        return try await derived.get()
                    }
                }
                while started.value < tasks { await Task.yield() }
                try? await Task.sleep(for: .milliseconds(2))
                for task in waiters { task.cancel() }
                for task in waiters {
                    #expect(Self.typed(await task.result) == .failure(.cancelled))
                }
                #expect(
                    innerStops.value == 1, "inPlace \(inPlace), \(tasks) tasks: inner stopped \(innerStops.value) times"
                )
                #expect(inner.peek() == .failure(.cancelled))
                #expect(derived.peek() == .failure(.cancelled))
            }
        }

        /// A step that throws: `andThen` and `fallback` fail with the error, in place and on a
        /// queue, and `uponFailure` gets it once.
        @Test(arguments: [true, false])
        func throwingStepsFail(inPlace: Bool) {
            for kind in Kind.allCases {
                let source: Attempt<Int, TestError> =
                    kind == .andThen ? Attempt(succeededWith: 1) : Attempt(failedWith: .failed(1))
                let derived: Attempt<Int, TestError>
                switch (kind, inPlace) {
                case (.andThen, true):
                    derived = source.andThen(upon: .immediate) {
                        (_: Int) throws(TestError) -> Attempt<Int, TestError> in
                        throw .failed(8)
                    }
                case (.andThen, false):
                    derived = source.andThen(upon: Self.steps) {
                        (_: Int) throws(TestError) -> Attempt<Int, TestError> in
                        throw .failed(8)
                    }
                case (.fallback, true):
                    derived = source.fallback(upon: .immediate) {
                        (_: TestError) throws(TestError) -> Attempt<Int, TestError> in
                        throw .failed(8)
                    }
                case (.fallback, false):
                    derived = source.fallback(upon: Self.steps) {
                        (_: TestError) throws(TestError) -> Attempt<Int, TestError> in
                        throw .failed(8)
                    }
                }
                let callbacks = Callbacks()
                callbacks.watch(derived)
                Self.flush()
                #expect(derived.peek() == .failure(.failed(8)))
                #expect(!derived.isCancelled)
                #expect(callbacks.failures.value == 1 && callbacks.successes.value == 0)
            }
        }

        /// The attempt an in-place `andThen` started is orphaned (its own step dropped): the stage
        /// that follows it is orphaned with it, and releases its handlers.
        @Test(arguments: Dropper.allCases)
        func innerAttemptOrphanedAfterTheStepRan(dropper: Dropper) {
            let live = LiveCount()
            let runs = Counter()
            let dropping = DroppingExecutor(dropper)
            let source = HeldWriter<Int, TestError>()
            let derived = source.attempt.andThen(upon: .immediate) { [executor = dropping.executor] value in
                Attempt<Int, TestError>(succeededWith: value).map(upon: executor) { $0 + 1 }
            }
            let handler = LifetimeTracked(live)
            derived.upon(.immediate) { _ in
                _ = handler
                runs.increment()
            }
            _ = consume handler
            source.succeed(with: 1)
            #expect(derived.peek() == nil)
            dropping.drop()
            #expect(derived.peek() == nil, "orphaned")
            #expect(runs.value == 0)
            #expect(live.value == 0, "the orphan's handler is released")
            derived.cancel()
            #expect(derived.isCancelled && derived.peek() == nil)
        }

        /// A step on a thread executor racing its shutdown: the stage is decided (the step ran) or
        /// orphaned, never left pending, and every capture is released.
        @Test(arguments: Kind.allCases)
        func stepRacesThreadShutdown(kind: Kind) {
            final class Round: Sendable {
                let thread = ThreadExecutor(name: "step-node-merge.race")
                let source = HeldWriter<Int, TestError>()
                let derived: Attempt<Int, TestError>
                let live = LiveCount()
                let stepRuns = Counter()
                let runs = Counter()
                init(kind: Kind) {
                    let tracked = LifetimeTracked(live)
                    derived = StepNodeMergeAttackTests.followOn(thread, source.attempt, kind: kind) {
                        [stepRuns] result in
                        _ = tracked
                        stepRuns.increment()
                        return Attempt(filledWith: result.map { $0 + 1 })
                    }
                    _ = consume tracked
                    derived.upon(.immediate) { [runs] _ in runs.increment() }
                }
            }
            let rounds = max(100, TestSize.attack.threadRaceRounds / 10)
            let fixtures = (0..<rounds).map { _ in Round(kind: kind) }
            RaceHarness.run(
                fixtures,
                left: { round in
                    if kind == .andThen { round.source.succeed(with: 1) } else { round.source.fail(with: .failed(1)) }
                },
                right: { _ = $0.thread.shutdown() })
            var counts: [String: Int] = [:]
            for round in fixtures {
                _ = round.thread.shutdown().wait(until: .now() + 10)
                let result = round.derived.peek()
                let name = result == nil ? "orphaned" : "step ran"
                counts[name, default: 0] += 1
                let expected: Result<Int, TestError> = kind == .andThen ? .success(2) : .failure(.failed(1))
                #expect(result == nil || result == expected, "\(kind): \(String(describing: result))")
                #expect((result == nil) == (round.stepRuns.value == 0), "\(kind): orphaned iff the step never ran")
                #expect(round.runs.value == (result == nil ? 0 : 1))
                #expect(round.live.value == 0)
            }
            progress("step vs thread shutdown, \(kind): \(counts)")
        }

        static func followOn(
            _ executor: some Executor, _ source: Attempt<Int, TestError>, kind: Kind,
            _ start: @escaping @Sendable (Result<Int, TestError>) -> Attempt<Int, TestError>
        ) -> Attempt<Int, TestError> {
            switch kind {
            case .andThen: source.andThen(upon: executor) { start(.success($0)) }
            case .fallback: source.fallback(upon: executor) { start(.failure($0)) }
            }
        }

        // MARK: Joins over inputs in every state

        enum InputState: String, CaseIterable, Sendable { case succeeded, failed, cancelled, pending, orphaned }

        final class Input: Sendable {
            let state: InputState
            let value: Int
            let writer: Mutex<HeldWriter<Int, TestError>?>
            let attempt: Attempt<Int, TestError>
            let cancels = Counter()

            init(_ state: InputState, value: Int) {
                self.state = state
                self.value = value
                let writer = HeldWriter<Int, TestError>()
                writer.onCancel { [cancels] in cancels.increment() }
                attempt = writer.attempt
                switch state {
                case .succeeded: writer.succeed(with: value)
                case .failed: writer.fail(with: .failed(value))
                case .cancelled: writer.attempt.cancel()
                case .pending, .orphaned: break
                }
                self.writer = Mutex(state == .orphaned ? nil : writer)
            }

            /// What the input decided at once, if anything.
            var early: Result<Int, TestError>? {
                switch state {
                case .succeeded: .success(value)
                case .failed: .failure(.failed(value))
                case .cancelled: .failure(.cancelled)
                case .pending, .orphaned: nil
                }
            }

            func succeedIfPending() {
                _ = writer.withLock { $0 }?.succeed(with: value)
            }

            func failIfPending() {
                _ = writer.withLock { $0 }?.fail(with: .failed(value))
            }
        }

        static var stateTriples: [[InputState]] {
            InputState.allCases.flatMap { a in
                InputState.allCases.flatMap { b in InputState.allCases.map { c in [a, b, c] } }
            }
        }

        @Test(arguments: ["and", "allSucceeded", "firstSucceeded"])
        func joinsOverInputsInEveryState(join: String) {
            for states in Self.stateTriples {
                for settle in ["succeed", "fail"] {
                    checkJoin(join, states: states, settle: settle, keepInputs: false)
                    checkJoin(join, states: states, settle: settle, keepInputs: true)
                }
            }
        }

        private func checkJoin(_ join: String, states: [InputState], settle: String, keepInputs: Bool) {
            let inputs = states.enumerated().map { Input($0.element, value: $0.offset + 1) }
            let label = "\(join) \(states.map(\.rawValue)) settle \(settle) keepInputs \(keepInputs)"
            if keepInputs {
                // Something else needs every input: a join that finishes early must not stop them.
                for input in inputs { input.attempt.upon(.immediate) { _ in } }
            }
            let joined: Attempt<[Int], TestError>
            switch join {
            case "and":
                joined = inputs[0].attempt.and(inputs[1].attempt, inputs[2].attempt)
                    .map(upon: .immediate) { (a: Int, b: Int, c: Int) in [a, b, c] }
            case "allSucceeded":
                joined = inputs.map(\.attempt).allSucceeded()
            default:
                joined = inputs.map(\.attempt).firstSucceeded().map(upon: .immediate) { [$0] }
            }
            let early = inputs.compactMap(\.early)
            let atOnce = joined.peek()
            // What the join may be right after it is made.
            let anyPending = states.contains(.pending)
            let anyOrphan = states.contains(.orphaned)
            if join == "firstSucceeded" {
                let successes = early.compactMap(\.successValue)
                if !successes.isEmpty {
                    #expect(
                        successes.map { [$0] }.contains(atOnce?.successValue ?? []),
                        "\(label): \(String(describing: atOnce))")
                } else if anyPending {
                    #expect(atOnce == nil, "\(label): decided before its pending inputs: \(String(describing: atOnce))")
                } else if anyOrphan {
                    #expect(atOnce == nil, "\(label): orphaned expected, got \(String(describing: atOnce))")
                } else {
                    let failures = early.compactMap(\.failureValue)
                    #expect(
                        atOnce.flatMap(\.failureValue).map(failures.contains) == true,
                        "\(label): \(String(describing: atOnce))")
                }
            } else {
                let failures = early.compactMap(\.failureValue)
                if !failures.isEmpty {
                    #expect(
                        atOnce.flatMap(\.failureValue).map(failures.contains) == true,
                        "\(label): \(String(describing: atOnce))")
                } else if anyPending || anyOrphan {
                    #expect(atOnce == nil, "\(label): \(String(describing: atOnce))")
                } else {
                    #expect(atOnce == .success([1, 2, 3]), "\(label): \(String(describing: atOnce))")
                }
            }
            #expect(
                joined.isCancelled == (atOnce == .failure(.cancelled)),
                "\(label): isCancelled \(joined.isCancelled) for \(String(describing: atOnce))")
            // Pending inputs of a join decided at once were stopped unless something else needs them.
            for input in inputs where input.state == .pending {
                let stopped = input.cancels.value
                if atOnce != nil && !keepInputs {
                    #expect(
                        stopped == 1,
                        "\(label): a pending input the decided join let go of was told to stop \(stopped) times")
                    #expect(input.attempt.peek() == .failure(.cancelled))
                } else {
                    #expect(stopped == 0, "\(label): a pending input was stopped while needed")
                }
            }
            // Settle the pending inputs, then check the final result.
            for input in inputs {
                if settle == "succeed" { input.succeedIfPending() } else { input.failIfPending() }
            }
            let final = joined.peek()
            if let atOnce {
                #expect(final == atOnce, "\(label): changed from \(atOnce) to \(String(describing: final))")
                return
            }
            let all = inputs.map { $0.attempt.peek() }
            if join == "firstSucceeded" {
                let successes = all.compactMap { $0?.successValue }
                if !successes.isEmpty {
                    #expect(
                        successes.map { [$0] }.contains(final?.successValue ?? []),
                        "\(label): \(String(describing: final))")
                } else if anyOrphan {
                    #expect(final == nil, "\(label): not orphaned: \(String(describing: final))")
                } else {
                    #expect(final?.failureValue != nil, "\(label): \(String(describing: final))")
                }
            } else {
                let failures = all.compactMap { $0?.failureValue }
                if !failures.isEmpty {
                    #expect(
                        final.flatMap(\.failureValue).map(failures.contains) == true,
                        "\(label): \(String(describing: final))")
                } else if anyOrphan {
                    #expect(final == nil, "\(label): not orphaned: \(String(describing: final))")
                } else {
                    #expect(final == .success([1, 2, 3]), "\(label): \(String(describing: final))")
                }
            }
            #expect(joined.isCancelled == (final == .failure(.cancelled)), "\(label): isCancelled")
        }

        /// A join is cancelled while its inputs decide: every input that nothing else needs is
        /// stopped or decided, and the join has one result.
        @Test(arguments: ["and", "allSucceeded", "firstSucceeded"])
        func joinCancelRacesInputs(join: String) {
            final class Round: Sendable {
                let inputs = (0..<3).map { _ in HeldWriter<Int, TestError>() }
                let cancels = (0..<3).map { _ in Counter() }
                let joined: Attempt<Int, TestError>
                let callbacks = Callbacks()
                init(join: String) {
                    for (writer, counter) in zip(inputs, cancels) {
                        writer.onCancel { counter.increment() }
                    }
                    let attempts = inputs.map(\.attempt)
                    switch join {
                    case "and":
                        joined = attempts[0].and(attempts[1], attempts[2]).map(upon: .immediate) {
                            (a: Int, b: Int, c: Int) in a + b + c
                        }
                    case "allSucceeded":
                        joined = attempts.allSucceeded().map(upon: .immediate) { $0.reduce(0, +) }
                    default:
                        joined = attempts.firstSucceeded()
                    }
                    callbacks.watch(joined)
                }
            }
            RaceHarness.expectInterleavings(
                "\(join): cancel vs inputs",
                rounds: Self.rounds,
                expected: ["cancelled", "decided first"],
                setup: { Round(join: join) },
                left: { round in
                    round.inputs[1].succeed(with: 2)
                    round.inputs[0].fail(with: .failed(1))
                    round.inputs[2].succeed(with: 3)
                },
                right: { $0.callbacks.cancel($0.joined) },
                classify: { round in
                    Self.flush()
                    let result = round.joined.peek()
                    #expect(round.callbacks.late.value == 0, "\(join): a callback after cancel() returned")
                    #expect(round.joined.isCancelled)
                    for (writer, counter) in zip(round.inputs, round.cancels) {
                        #expect(counter.value <= 1)
                        #expect(writer.peek() != nil, "\(join): an input left pending")
                        #expect((counter.value == 1) == (writer.peek() == .failure(.cancelled)))
                    }
                    switch result {
                    case .failure(.cancelled)?:
                        #expect(round.callbacks.successes.value + round.callbacks.failures.value == 0)
                        return "cancelled"
                    case .failure(.failed(1))? where join != "firstSucceeded":
                        #expect(round.callbacks.successes.value == 0)
                        #expect(round.callbacks.failures.value <= 1)
                        return "decided first"
                    case .success(2)? where join == "firstSucceeded":
                        #expect(round.callbacks.failures.value == 0)
                        #expect(round.callbacks.successes.value <= 1)
                        return "decided first"
                    default:
                        return "bad: \(String(describing: result))"
                    }
                })
        }

        // MARK: uponSuccess / uponFailure

        /// Lines recorded from any thread.
        final class Lines: Sendable {
            private let lines = Mutex<[String]>([])
            func withLock<R>(_ body: (inout [String]) -> R) -> R { lines.withLock { body(&$0) } }
        }

        /// A task's result with its typed error.
        static func typed(_ result: Result<Int, any Error>) -> Result<Int, TestError>? {
            switch result {
            case .success(let value): .success(value)
            case .failure(let error as TestError): .failure(error)
            case .failure: nil
            }
        }

        @Test func uponSuccessDeliversANilValue() {
            let queue = DispatchQueue(label: "step-node-merge.nil")
            // Finished before the callbacks: delivered in place and on a queue.
            let finished = Attempt<Int?, TestError>(succeededWith: nil)
            let seen = Lines()
            finished.uponSuccess(.immediate) { value in
                seen.withLock { $0.append("in place \(String(describing: value))") }
            }
            .uponFailure(.immediate) { _ in seen.withLock { $0.append("in place failure") } }
            finished.uponSuccess(queue) { value in seen.withLock { $0.append("queued \(String(describing: value))") } }
                .uponFailure(queue) { _ in seen.withLock { $0.append("queued failure") } }
            // Pending, then succeeding with nil.
            let writer = HeldWriter<Int?, TestError>()
            writer.attempt.uponSuccess(.immediate) { value in
                seen.withLock { $0.append("later \(String(describing: value))") }
            }
            .uponFailure(.immediate) { _ in seen.withLock { $0.append("later failure") } }
            writer.attempt.uponSuccess(queue) { value in
                seen.withLock { $0.append("later queued \(String(describing: value))") }
            }.uponFailure(queue) { _ in seen.withLock { $0.append("later queued failure") } }
            writer.succeed(with: nil)
            // A doubly optional value, `.some(nil)`, and an `any Error` attempt.
            let nested = Attempt<Int??, any Error>(succeededWith: .some(nil))
            nested.uponSuccess(.immediate) { value in seen.withLock { $0.append("nested \(String(describing: value))") }
            }
            .uponFailure(.immediate) { _ in seen.withLock { $0.append("nested failure") } }
            // Through a map and an andThen in place.
            let mapped = writer.attempt.map(upon: .immediate) { $0 }.andThen(upon: .immediate) {
                Attempt<Int?, TestError>(succeededWith: $0)
            }
            mapped.uponSuccess(.immediate) { value in
                seen.withLock { $0.append("derived \(String(describing: value))") }
            }
            .uponFailure(.immediate) { _ in seen.withLock { $0.append("derived failure") } }
            queue.sync {}
            let lines = seen.withLock { $0 }.sorted()
            #expect(
                lines == [
                    "derived nil", "in place nil", "later nil", "later queued nil", "nested Optional(nil)",
                    "queued nil",
                ], "\(lines)")
        }

        @Test func uponFailureOnlyForFailuresOfGenericOptionals() {
            func probe<T: Sendable>(_ value: T, _ seen: Lines) {
                let attempt = Attempt<T, TestError>(succeededWith: value)
                attempt.uponSuccess(.immediate) { v in seen.withLock { $0.append("success \(v)") } }
                    .uponFailure(.immediate) { e in seen.withLock { $0.append("failure \(e)") } }
                let failed = Attempt<T, TestError>(failedWith: .failed(3))
                failed.uponSuccess(.immediate) { v in seen.withLock { $0.append("success \(v)") } }
                    .uponFailure(.immediate) { e in seen.withLock { $0.append("failure \(e)") } }
            }
            let seen = Lines()
            probe(Int?.none, seen)
            probe(Optional<Int?>.some(nil), seen)
            #expect(
                seen.withLock { $0 } == [
                    "success nil", "failure failed(3)", "success Optional(nil)", "failure failed(3)",
                ], "\(seen.withLock { $0 })")
        }

        /// Callbacks race `cancel()` on an attempt that the writer finishes at the same moment:
        /// a callback runs at most once, never after `cancel()` returned, and exactly once if
        /// the attempt finished with its kind and was not cancelled.
        @Test(arguments: ["nil", "value", "failure"])
        func callbacksRaceCancel(outcome: String) {
            final class Round: Sendable {
                let writer = HeldWriter<Int?, TestError>()
                let successes = Counter()
                let nils = Counter()
                let failures = Counter()
                let late = Counter()
                let cancelReturned = Atomic<Bool>(false)
                let executor: String
                init(executor: String) {
                    self.executor = executor
                    let queue = StepNodeMergeAttackTests.callbacks
                    let success: @Sendable (Int?) -> Void = { [self] value in
                        successes.increment()
                        if value == nil { nils.increment() }
                        if cancelReturned.load(ordering: .acquiring) { late.increment() }
                    }
                    let failure: @Sendable (TestError) -> Void = { [self] _ in
                        failures.increment()
                        if cancelReturned.load(ordering: .acquiring) { late.increment() }
                    }
                    if executor == "queue" {
                        writer.attempt.uponSuccess(queue, execute: success).uponFailure(queue, execute: failure)
                    }
                }
                /// Adds callbacks on the queue while the race runs, from the left.
                func addLate() {
                    let queue = StepNodeMergeAttackTests.callbacks
                    let success: @Sendable (Int?) -> Void = { [self] value in
                        successes.increment()
                        if value == nil { nils.increment() }
                        if cancelReturned.load(ordering: .acquiring) { late.increment() }
                    }
                    let failure: @Sendable (TestError) -> Void = { [self] _ in
                        failures.increment()
                        if cancelReturned.load(ordering: .acquiring) { late.increment() }
                    }
                    writer.attempt.uponSuccess(queue, execute: success).uponFailure(queue, execute: failure)
                }
            }
            let result: Result<Int?, TestError> =
                switch outcome {
                case "nil": .success(nil)
                case "value": .success(4)
                default: .failure(.failed(4))
                }
            for executor in ["queue", "added during the race"] {
                RaceHarness.expectInterleavings(
                    "callbacks \(outcome) \(executor) vs cancel",
                    rounds: Self.rounds,
                    expected: ["finished, delivered", "finished, withdrawn", "cancelled"],
                    setup: { Round(executor: executor) },
                    left: { round in
                        if round.executor != "queue" { round.addLate() }
                        round.writer.fill(with: result)
                    },
                    right: { round in
                        StepNodeMergeAttackTests.callbacks.sync {
                            round.writer.attempt.cancel()
                            round.cancelReturned.store(true, ordering: .releasing)
                        }
                    },
                    classify: { round in
                        StepNodeMergeAttackTests.callbacks.sync {}
                        let decided = round.writer.peek()
                        let runs = round.successes.value + round.failures.value
                        #expect(round.late.value == 0, "a callback after cancel() returned")
                        #expect(runs <= 1)
                        if decided == .failure(.cancelled) {
                            #expect(runs == 0)
                            return "cancelled"
                        }
                        #expect(decided == result)
                        if case .success(let value) = result {
                            #expect(round.failures.value == 0, "uponFailure for \(String(describing: value))")
                            #expect(round.nils.value == round.successes.value * (value == nil ? 1 : 0))
                        } else {
                            #expect(round.successes.value == 0)
                        }
                        return runs == 1 ? "finished, delivered" : "finished, withdrawn"
                    })
            }
        }

        // MARK: get()

        /// Tasks await `get()` while some are cancelled and the writer finishes: each returns or
        /// throws once, the producer is told to stop iff every task gave up first, and then every
        /// task threw the cancellation.
        @Test(arguments: [1, 3])
        func getFromManyTasksRacesCancellationAndFill(tasks: Int) async {
            let rounds = max(100, TestSize.attack.raceRounds / 10)
            var counts: [String: Int] = [:]
            for round in 0..<rounds {
                let writer = HeldWriter<Int, TestError>()
                let stops = Counter()
                writer.onCancel { stops.increment() }
                let attempt = writer.attempt
                let cancelled = round % 3  // 0: no task cancelled; 1: some; 2: all
                let started = Counter()
                let waiters = (0..<tasks).map { _ in
                    Task { () async throws(TestError) -> Int in
                        started.increment()
                        return try await attempt.get()
                    }
                }
                while started.value < tasks { await Task.yield() }
                RaceHarness.pause(Int.random(in: 0..<400))
                let cancelCount = cancelled == 0 ? 0 : cancelled == 1 ? max(1, tasks - 1) : tasks
                // The fill lands anywhere from at once to after the cancelled tasks have resumed
                // and given their units back.
                let delay = [0, 20, 60, 150].randomElement()!
                let fill = Task.detached {
                    if delay == 0 {
                        RaceHarness.pause(Int.random(in: 0..<800))
                    } else {
                        usleep(UInt32.random(in: 0..<UInt32(delay)))
                    }
                    writer.succeed(with: 7)
                }
                for task in waiters.prefix(cancelCount) { task.cancel() }
                var results: [Result<Int, TestError>] = []
                for task in waiters { results.append(Self.typed(await task.result) ?? .failure(.timedOut)) }
                await fill.value
                let decided = attempt.peek()
                #expect(stops.value <= 1)
                #expect(
                    (stops.value == 1) == (decided == .failure(.cancelled)),
                    "stop iff cancelled: \(String(describing: decided))")
                for (index, result) in results.enumerated() {
                    if index >= cancelCount {
                        // Not cancelled: the task needed the attempt, so it got the value.
                        #expect(
                            result == .success(7),
                            "an uncancelled task got \(result), attempt \(String(describing: decided))")
                    } else {
                        #expect(result == .success(7) || result == .failure(.cancelled))
                    }
                }
                if cancelCount < tasks {
                    #expect(stops.value == 0, "a task still waited, yet the producer was told to stop")
                }
                let name =
                    "\(cancelCount)/\(tasks) cancelled: " + (decided == .failure(.cancelled) ? "stopped" : "filled")
                counts[name, default: 0] += 1
            }
            progress("get() race, \(tasks) tasks: \(counts)")
        }

        /// Tasks in `get()` that give up stop the producer only if nothing else needs it.
        ///
        /// Every task awaiting `get()` gives up with nothing else needing the attempt: the
        /// producer is told to stop once, by the time the last task has thrown. A derived stage
        /// or a handler that needs it keeps it going.
        @Test(arguments: ["nothing else", "a handler", "a derived stage", "an andThen in place"])
        func getGivingUpStopsTheProducerIffNothingElseNeedsIt(other: String) async {
            for tasks in [1, 2, 5] {
                let writer = HeldWriter<Int, TestError>()
                let stops = Counter()
                writer.onCancel { stops.increment() }
                let attempt = writer.attempt
                var keep: Attempt<Int, TestError>?
                switch other {
                case "a handler": attempt.upon(.immediate) { _ in }
                case "a derived stage": keep = attempt.map(upon: .immediate) { $0 }
                case "an andThen in place": keep = attempt.andThen(upon: .immediate) { Attempt(succeededWith: $0) }
                default: break
                }
                let started = Counter()
                let waiters = (0..<tasks).map { _ in
                    Task { () async throws(TestError) -> Int in
                        started.increment()
                        return try await attempt.get()
                    }
                }
                while started.value < tasks { await Task.yield() }
                try? await Task.sleep(for: .milliseconds(2))
                for task in waiters { task.cancel() }
                for task in waiters {
                    let result = Self.typed(await task.result)
                    #expect(result == .failure(.cancelled), "\(other), \(tasks) tasks: \(result)")
                }
                if other == "nothing else" {
                    #expect(
                        stops.value == 1, "\(tasks) tasks gave up: the producer was told to stop \(stops.value) times")
                    #expect(attempt.peek() == .failure(.cancelled))
                } else {
                    #expect(stops.value == 0, "\(other) still needs it")
                    #expect(attempt.peek() == nil)
                    writer.succeed(with: 1)
                    #expect(keep?.peek() == keep.map { _ in .success(1) })
                }
                _ = keep
            }
        }

        /// `get()` on an orphaned attempt waits until its task is cancelled, then throws the
        /// cancellation; on an orphaned stage that follows (an andThen whose step was dropped),
        /// the same.
        @Test func getOnAnOrphanThrowsOnTaskCancellation() async {
            var writer: HeldWriter<Int, TestError>? = HeldWriter<Int, TestError>()
            let attempt = writer!.attempt
            var manual: ManualExecutor? = ManualExecutor()
            let source = HeldWriter<Int, TestError>()
            let derived = source.attempt.andThen(upon: Forwarder(manual: manual!, thread: nil)) {
                Attempt(succeededWith: $0)
            }
            source.succeed(with: 1)
            writer = nil
            manual = nil
            #expect(attempt.peek() == nil && derived.peek() == nil)
            for target in [attempt, derived] {
                let task = Task { () async throws(TestError) -> Int in try await target.get() }
                try? await Task.sleep(for: .milliseconds(2))
                task.cancel()
                #expect(Self.typed(await task.result) == .failure(.cancelled))
            }
            _ = writer
            _ = manual
        }
    }
}
