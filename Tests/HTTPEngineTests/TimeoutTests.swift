import EventLoop
import Testing
@testable import HTTPEngine

/// The whole-transfer timeout ends a request that never answers.
@Suite struct TimeoutTests {
    @Test func hangingUpstreamTimesOut() throws {
        let h = try Harness()
        var req = TransferRequest(url: h.url("/hang"))
        req.timeout = 0.5
        let (t, r) = try h.start(req)
        h.run(seconds: 10) { r.completions > 0 }
        #expect(r.completions == 1)
        #expect(r.failure?.code == 28)  // CURLE_OPERATION_TIMEDOUT
        #expect(r.order == ["done"])
        // libcurl's account of the timeout that fired: the 0.5 s asked for, not a shorter
        // one ("Operation timed out after 501 milliseconds with 0 bytes received").
        let text = r.failure?.text ?? ""
        let prefix = "Operation timed out after "
        let ms = text.hasPrefix(prefix) ? Int(text.dropFirst(prefix.count).prefix { $0.isNumber }) : nil
        #expect(ms.map { $0 >= 500 } == true, "\(text)")
        withExtendedLifetime(t) {}
        #expect(try h.finish() == [])
    }

    /// A transfer paused before its deadline does not time out while paused, even when
    /// the timer was armed for it, and times out once it has run its time after
    /// `unpause`; another transfer times out meanwhile as if nothing had happened.
    @Test func aPausedTransferTimesOutAfterItsUnpause() throws {
        let h = try Harness()
        var first = TransferRequest(url: h.url("/hang")), second = first
        first.timeout = 0.3
        second.timeout = 0.6
        let (paused, r1) = try h.start(first)
        let (running, r2) = try h.start(second)
        paused.pause()
        h.run(seconds: 10) { r2.completions > 0 }
        #expect(r2.failure?.code == 28)
        h.idle(seconds: 0.2)
        #expect(r1.completions == 0, "paused: its clock stopped")
        paused.unpause()
        h.run(seconds: 10) { r1.completions > 0 }
        #expect(r1.failure?.code == 28)  // CURLE_OPERATION_TIMEDOUT
        withExtendedLifetime((paused, running)) {}
        #expect(try h.finish() == [])
    }

    /// Transfers whose time runs out together end `timeoutsPerTurn` a loop turn, not all
    /// in the turn their timer fires (the loop serves nobody else meanwhile); each still
    /// ends with the timeout's failure.
    @Test func manyTimeoutsEndOverSeveralTurns() throws {
        let h = try Harness()
        let n = 100
        var pairs: [(Transfer, Recorder)] = []
        for _ in 0..<n {
            var req = TransferRequest(url: h.url("/hang"))
            req.timeout = 0.3
            pairs.append(try h.start(req))
        }
        // A turn starts at each run of this prepare handle; count the endings per turn.
        let turns = try Prepare(loop: h.loop)
        var turn = 0
        turns.start { turn += 1 }
        var endedIn: [Int: Int] = [:]
        for (_, r) in pairs { r.onDone = { _ in endedIn[turn, default: 0] += 1 } }
        h.run(seconds: 30) { pairs.allSatisfy { $0.1.completions > 0 } }
        turns.close()
        #expect(pairs.allSatisfy { $0.1.completions == 1 && $0.1.failure?.code == 28 })
        // The harness runs the loop a turn at a time (`UV_RUN_ONCE`), and such a turn runs
        // due timers again after its poll: one counted turn can hold two of the timer's.
        let largest = endedIn.values.max() ?? 0
        #expect(largest <= 2 * TransferEngine.timeoutsPerTurn, "\(largest) ended in one turn: \(endedIn)")
        #expect(endedIn.count >= n / (2 * TransferEngine.timeoutsPerTurn))
        pairs = []
        #expect(try h.finish() == [])
    }

    /// A timeout longer than the response takes changes nothing.
    @Test func generousTimeoutSucceeds() throws {
        let h = try Harness()
        var req = TransferRequest(url: h.url("/delay/100"))
        req.timeout = 5
        let r = try h.fetch(req)
        #expect(r.succeeded)
        #expect(r.bodyText == "ok")
        #expect(try h.finish() == [])
    }
}
