import Testing

@testable import Deferred

/// The adaptive poll of blocking waits, as pure rules: it settles at the maximum where polls
/// catch values or sleeping is dear (an idle machine), and at none where sleeping is cheap (a
/// busy one).
@Suite struct SpinPolicyTests {
    @Test func pollsThatCatchTheirValueRaiseTheLimitUpToTheMaximum() {
        var policy = SpinPolicy(limit: 0)
        for _ in 0..<100 {
            policy = policy.after(.caught)
        }
        #expect(policy.limit == SpinPolicy.maximum)
    }

    @Test func cheapSleepsLowerTheLimitToNoPollingAtAll() {
        var policy = SpinPolicy.initial
        for _ in 0..<100 {
            policy = policy.after(.slept(2_000))
        }
        #expect(policy.limit == 0)
        #expect(policy.after(.slept(2_000)).limit == 0)
    }

    @Test func dearSleepsRaiseTheLimit() {
        let policy = SpinPolicy(limit: 0)
        #expect(policy.after(.slept(40_000)).limit == SpinPolicy.step)
        #expect(SpinPolicy(limit: SpinPolicy.maximum).after(.slept(40_000)).limit == SpinPolicy.maximum)
    }

    /// Where most waits are caught and a few sleep cheaply, polling stays on; where most sleep
    /// cheaply, it stays off.
    @Test func theLimitFollowsWhatMostWaitsSee() {
        var mostlyCaught = SpinPolicy(limit: 0)
        var mostlyCheap = SpinPolicy.initial
        for round in 0..<1_000 {
            mostlyCaught = mostlyCaught.after(round % 4 == 0 ? .slept(1_000) : .caught)
            mostlyCheap = mostlyCheap.after(round % 4 == 0 ? .caught : .slept(1_000))
        }
        #expect(mostlyCaught.limit >= SpinPolicy.maximum - SpinPolicy.step)
        #expect(mostlyCheap.limit <= SpinPolicy.step)
    }
}

/// A poll that lost its core means the machine is oversubscribed: polling stops, for a while.
@Suite struct SpinPolicyPreemptionTests {
    @Test func aPreemptedPollStopsPollingForAWhileWhateverComesNext() {
        var policy = SpinPolicy(limit: SpinPolicy.maximum).after(.preempted)
        #expect(policy.limit == 0)
        for _ in 0..<(SpinPolicy.waitsWithoutPollingAfterPreemption - 1) {
            policy = policy.after(.caught)
            #expect(policy.limit == 0)
        }
        policy = policy.after(.slept(40_000))
        #expect(policy.limit == 0 && policy.holdOff == 0)
        #expect(policy.after(.caught).limit == SpinPolicy.step)
    }

    @Test func thePolicyTravelsAsOneWord() {
        let policies = [
            SpinPolicy.initial, SpinPolicy(limit: 0), SpinPolicy(limit: SpinPolicy.maximum).after(.preempted),
            SpinPolicy(limit: 750, holdOff: 3),
        ]
        for policy in policies {
            #expect(SpinPolicy(word: policy.word) == policy)
        }
    }
}

/// Where a wait stops polling.
@Suite struct SpinPolicyPollEndTests {
    @Test func aWaitPollsForTheLimitThenSleepsUntilItsDeadline() {
        #expect(SpinPolicy(limit: 1_000).pollEnd(from: 10_000, deadline: 50_000) == 11_000)
        #expect(SpinPolicy(limit: 0).pollEnd(from: 10_000, deadline: .max) == 10_000)
    }

    @Test func aDeadlineCloserThanTheLongestPollIsPolledToWhateverTheLimit() {
        let start: UInt64 = 10_000
        #expect(SpinPolicy(limit: 0).pollEnd(from: start, deadline: start + 300) == start + 300)
        #expect(
            SpinPolicy(limit: 0).pollEnd(from: start, deadline: start + SpinPolicy.maximum)
                == start + SpinPolicy.maximum)
        #expect(SpinPolicy(limit: 0).pollEnd(from: start, deadline: start + SpinPolicy.maximum + 1) == start)
    }

    @Test func aDeadlineAlreadyPastEndsThePollAtOnce() {
        #expect(SpinPolicy.initial.pollEnd(from: 10_000, deadline: 5_000) == 5_000)
    }
}
