import EventLoop
import Testing
@testable import HTTPEngine

/// The caller's pause (`Transfer.pause`/`unpause`): it holds both directions, composes
/// with the delegate's own pause for lack of room, and stops the timeout's clock.
@Suite struct ClientPauseTests {
    /// The clock counts only the stretches it ran.
    @Test func activeClockSkipsStoppedStretches() {
        var c = ActiveClock()
        c.start(at: 10)
        #expect(c.deadline(for: 1) == 11)
        c.stop(at: 10.5)
        #expect(c.seconds(at: 20) == 0.5)
        #expect(c.deadline(for: 1) == nil)
        c.start(at: 30)
        c.start(at: 31)  // already running: the stretch began at 30
        #expect(c.seconds(at: 30.25) == 0.75)
        #expect(c.deadline(for: 1) == 30.5)
    }

    /// Paused before the response, with a timeout shorter than the pause: nothing arrives
    /// while paused, and after `unpause` the transfer completes instead of timing out.
    @Test func pausedTimeDoesNotCountTowardsTheTimeout() throws {
        let h = try Harness()
        var req = TransferRequest(url: h.url("/bytes/5000?seed=3"))
        req.timeout = 0.3
        let r = Recorder(expectingSeed: 3)
        let (t, _) = try h.start(req, r)
        t.pause()
        #expect(t.pauseReasons == .requested)
        #expect(h.engine.pausedTransferCount == 1)
        h.idle(seconds: 1)
        #expect(r.completions == 0)
        #expect(r.bodyCount == 0)
        #expect(r.headCount == 0)
        t.unpause()
        h.run(seconds: 30) { r.completions > 0 }
        #expect(r.succeeded, "\(String(describing: r.failure))")
        #expect(r.checker?.matches(count: 5000) == true)
        #expect(!t.isPaused)
        #expect(h.engine.pausedTransferCount == 0)
        #expect(try h.finish() == [])
    }

    /// A reader without room keeps receiving stopped after the caller's `unpause`; its
    /// own `resume` lets the rest come, byte-exact.
    @Test func unpauseLeavesAReaderWithoutRoomPaused() throws {
        let h = try Harness()
        let r = Recorder(expectingSeed: 5)
        var refuse = true
        r.accept = { _ in !refuse }
        let (t, _) = try h.start(TransferRequest(url: h.url("/bytes/300000?seed=5")), r)
        h.run(seconds: 30) { t.pauseReasons.contains(.noRoom) }
        #expect(h.engine.pausedTransferCount == 1)
        t.pause()
        #expect(t.pauseReasons == [.noRoom, .requested])
        #expect(h.engine.pausedTransferCount == 1)
        t.unpause()
        h.idle(seconds: 0.3)
        #expect(t.pauseReasons == .noRoom)
        #expect(h.engine.pausedTransferCount == 1)
        #expect(r.bodyCount == 0)
        refuse = false
        t.resume()
        h.run(seconds: 30) { r.completions > 0 }
        #expect(r.succeeded)
        #expect(r.checker?.matches(count: 300000) == true)
        #expect(h.engine.pausedTransferCount == 0)
        #expect(try h.finish() == [])
    }

    /// The engine's count of paused transfers (what `/metrics` reports as
    /// `xhrpc_transfers_paused`) follows pauses as they begin and end, and a paused
    /// transfer that is cancelled, or still paused at shutdown, leaves it.
    @Test func pausedCountFollowsPausesCancelsAndShutdown() throws {
        let h = try Harness()
        var transfers: [Transfer] = []
        var recorders: [Recorder] = []
        for seed in 0..<3 {
            let (t, r) = try h.start(TransferRequest(url: h.url("/bytes/5000?seed=\(seed)")), Recorder(expectingSeed: seed))
            t.pause()
            transfers.append(t)
            recorders.append(r)
        }
        #expect(h.engine.pausedTransferCount == 3)
        transfers[0].pause()  // already paused: counted once
        #expect(h.engine.pausedTransferCount == 3)
        transfers[1].unpause()
        #expect(h.engine.pausedTransferCount == 2)
        h.engine.cancel(transfers[0])
        #expect(h.engine.pausedTransferCount == 1)
        h.run(seconds: 30) { recorders[1].completions > 0 }
        #expect(recorders[1].succeeded)
        #expect(h.engine.pausedTransferCount == 1)
        #expect(try h.finish() == [])
        #expect(h.engine.pausedTransferCount == 0)
        #expect(transfers[2].state == .cancelled)
    }
}
