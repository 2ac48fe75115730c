import Deferred
import Synchronization

/// The baseline for S15 and S16: a request shared by hand.
///
/// What a service writes to share one request among its callers with the same guarantees as
/// `SharedAttempts`: a lock around a dictionary of the runs in flight; each run keeps its callers'
/// own writers, fills them all when the work finishes, and cancels the work when the last caller
/// cancels.
final class HandWrittenSharing<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    /// One caller's writer, kept in an object so that a run can list it.
    final class Caller: Sendable {
        let writer = DeferredAttempt<Value, BenchFailure>()
    }

    /// A run in flight: its work, and the callers still waiting for it.
    ///
    /// `@unchecked Sendable`: its fields are read and written only under the table's lock.
    final class Run: @unchecked Sendable {
        var callers: [Int: Caller] = [:]
        var nextCaller = 0
        var work: Attempt<Value, BenchFailure>?
    }

    private let runs = Mutex<[Key: Run]>([:])

    /// This caller's attempt of the run for `key`, which `start` starts if none is in flight.
    func attempt(for key: Key, start: (Key) -> Attempt<Value, BenchFailure>) -> Attempt<Value, BenchFailure> {
        let caller = Caller()
        let (run, id, isNew) = runs.withLock { runs in
            let existing = runs[key]
            let run = existing ?? Run()
            if existing == nil {
                runs[key] = run
            }
            let id = run.nextCaller
            run.nextCaller += 1
            run.callers[id] = caller
            return (run, id, existing == nil)
        }
        caller.writer.onCancel { [weak self] in self?.leave(key, run, id) }
        if isNew {
            let work = start(key)
            let abandoned = runs.withLock { _ in
                run.work = work
                return run.callers.isEmpty
            }
            if abandoned {
                work.cancel()
            }
            work.upon(.immediate) { [weak self] result in self?.finish(key, run, result) }
        }
        return caller.writer.attempt
    }

    private func leave(_ key: Key, _ run: Run, _ id: Int) {
        let work: Attempt<Value, BenchFailure>? = runs.withLock { runs in
            guard run.callers.removeValue(forKey: id) != nil, run.callers.isEmpty else {
                return nil
            }
            if runs[key] === run {
                runs[key] = nil
            }
            return run.work
        }
        work?.cancel()
    }

    private func finish(_ key: Key, _ run: Run, _ result: Result<Value, BenchFailure>) {
        let callers: [Caller] = runs.withLock { runs in
            if runs[key] === run {
                runs[key] = nil
            }
            defer { run.callers = [:] }
            return Array(run.callers.values)
        }
        for caller in callers {
            caller.writer.fill(with: result)
        }
    }
}
