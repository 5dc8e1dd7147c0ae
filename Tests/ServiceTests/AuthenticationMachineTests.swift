import Testing
@testable import Service

/// `AuthenticationMachine` on its own, with attempts as plain numbers: one judged at a
/// time, a wrong token's answer held for the delay with the others waiting behind it,
/// the queue's bound, and the close after the last allowed failure. The Python
/// `test_principals.py` and `test_abuse.py` check the same rules with real sockets.
@Suite struct AuthenticationMachineTests {
    typealias Machine = AuthenticationMachine<Int>

    func judged(_ actions: [Machine.Action]) -> [Int] {
        actions.compactMap { if case .judge(let a) = $0 { a } else { nil } }
    }

    @Test func attemptsAreJudgedOneAtATimeAndWaitBehindAFailure() {
        var m = Machine()
        #expect(judged(m.received(1)) == [1])
        guard case .startFailureDelay(1)? = m.judged(1, .wrongToken).first else {
            Issue.record("a wrong token starts the delay")
            return
        }
        // Attempts during the delay wait.
        #expect(m.received(2).isEmpty)
        #expect(m.received(3).isEmpty)
        #expect(m.waiting == 2)
        let after = m.delayEnded(1)
        guard case .answerFailure(1)? = after.first else {
            Issue.record("the failure is answered when the delay ends: \(after)")
            return
        }
        #expect(judged(after) == [2])
        #expect(judged(m.judged(2, .answered)) == [3], "a success judges the next one (answered: already authenticated)")
        #expect(m.judged(3, .answered).isEmpty)
        #expect(m.failures == 1)
    }

    @Test func theQueueIsBounded() {
        var m = Machine()
        _ = m.received(0)
        _ = m.judged(0, .wrongToken)
        for i in 1...Machine.maxQueued { #expect(m.received(i).isEmpty) }
        guard case .refuseQueueFull(99)? = m.received(99).first else {
            Issue.record("past \(Machine.maxQueued) waiting, an attempt is refused at once")
            return
        }
        #expect(m.waiting == Machine.maxQueued)
    }

    @Test func theLastAllowedFailureClosesTheConnection() {
        var m = Machine()
        for i in 1...Machine.maxFailures {
            #expect(judged(m.received(i)) == [i])
            _ = m.judged(i, .wrongToken)
            let end = m.delayEnded(i)
            if i < Machine.maxFailures {
                #expect(end.count == 1)
            } else {
                guard end.count == 2, case .answerFailure(i) = end[0], case .close(i) = end[1] else {
                    Issue.record("failure \(i) must answer and close: \(end)")
                    return
                }
            }
        }
        #expect(m.failures == Machine.maxFailures)
    }

    /// Settled (the connection's held calls may run) only when no attempt waits or is
    /// delayed, and never once the connection is to close for its failures.
    @Test func settledWhenNothingIsUnanswered() {
        var m = Machine()
        #expect(m.isSettled)
        _ = m.received(1)  // judged at once, by the server, before anything else runs
        _ = m.judged(1, .wrongToken)
        #expect(!m.isSettled, "the failure's answer waits for the delay")
        #expect(m.received(2).isEmpty)
        _ = m.delayEnded(1)  // and judges 2, at once
        _ = m.judged(2, .answered)
        #expect(m.isSettled)
        for attempt in 3...(Machine.maxFailures + 1) {
            _ = m.received(attempt)
            _ = m.judged(attempt, .wrongToken)
            _ = m.delayEnded(attempt)
        }
        #expect(!m.isSettled, "closing after the last allowed failure")
    }
}
