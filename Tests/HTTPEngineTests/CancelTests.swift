#if canImport(Glibc)
import Glibc
#endif
import EventLoop
import Testing
@testable import HTTPEngine

/// `cancel` stops a transfer and nothing at all is heard from it afterwards, whether
/// called from outside (a timer), from inside a body callback, or while paused.
@Suite struct CancelTests {
    @Test func cancelFromTimerMidFlight() throws {
        let h = try Harness()
        let (t, r) = try h.start(TransferRequest(url: h.url("/drip/100000?chunk=100&delay=5")))
        h.run(seconds: 10) { r.bodyCount > 0 }
        #expect(r.bodyCount > 0)
        h.engine.cancel(t)
        let seen = r.order
        #expect(h.engine.activeTransfers == 0)
        h.idle(seconds: 0.3)
        #expect(r.order == seen)
        #expect(r.completions == 0)
        h.engine.cancel(t)  // twice: nothing happens
        #expect(try h.finish() == [])
    }

    /// A transfer cancelled while its socket still connects: libcurl 7.88 closes that
    /// socket with a plain `close` (no close-socket callback, no `CURL_POLL_REMOVE`), and
    /// the engine must stop watching the closed number all the same. A poll left on it
    /// made libuv abort the process when the poll had been started in the same turn,
    /// and otherwise watched whatever socket got the number next. The connect is held by
    /// a loopback listener whose backlog another client fills, so the SYN goes
    /// unanswered.
    @Test func cancelWhileConnectingForgetsTheSocket() throws {
        let listener = try Sentinel(backlog: 0)
        let filler = try listener.connectClient()
        defer { close(filler) }
        let h = try Harness()
        let (t, r) = try h.start(TransferRequest(url: listener.url()))
        func connecting() -> Bool {
            guard let fd = t.openedSockets.first, let w = h.engine.watch(fd) else { return false }
            return w.armed && w.armedEvents == .writable
        }
        h.run(seconds: 10) { connecting() }
        let fd = try #require(t.openedSockets.first)
        for _ in 0..<3 { h.loop.runNoWait() }
        #expect(connecting() && r.order.isEmpty)
        h.engine.cancel(t)
        #expect(h.engine.watch(fd) == nil)
        h.idle(seconds: 0.2)
        #expect(r.completions == 0)
        #expect(try h.finish() == [])
    }

    /// Many transfers cancelled at once leave the multi `removalsPerTurn` a loop turn
    /// (each closes its connection), silenced from the moment of `cancel`; shutdown
    /// takes the ones still waiting.
    @Test func manyCancelsLeaveOverSeveralTurns() throws {
        let h = try Harness()
        let n = 100
        var pairs: [(Transfer, Recorder)] = []
        for _ in 0..<n { pairs.append(try h.start(TransferRequest(url: h.url("/drip/100000?chunk=100&delay=50")))) }
        h.run(seconds: 10) { pairs.allSatisfy { $0.1.headCount > 0 } }
        #expect(pairs.allSatisfy { $0.1.headCount > 0 })
        let seen = pairs.map { $0.1.order }
        for (t, _) in pairs { h.engine.cancel(t) }
        #expect(h.engine.activeTransfers == 0)
        #expect(h.engine.active.count == n - TransferEngine.removalsPerTurn)
        // A turn starts at each run of this prepare handle; note what is left in the multi.
        let turns = try Prepare(loop: h.loop)
        var left: [Int] = []
        turns.start { left.append(h.engine.active.count) }
        h.run(seconds: 10) { h.engine.active.isEmpty }
        turns.close()
        #expect(h.engine.active.isEmpty)
        // The engine's turn handle may run before or after this one in the same phase.
        let steps = zip(left, left.dropFirst()).map { $0 - $1 }
        #expect(steps.allSatisfy { $0 <= 2 * TransferEngine.removalsPerTurn }, "\(left)")
        #expect(pairs.map { $0.1.order } == seen)
        #expect(pairs.allSatisfy { $0.1.completions == 0 })
        // Cancelled again, or shut down with removals still waiting: nothing more is heard.
        var more: [(Transfer, Recorder)] = []
        for _ in 0..<n { more.append(try h.start(TransferRequest(url: h.url("/drip/100000?chunk=100&delay=50")))) }
        h.run(seconds: 10) { more.allSatisfy { $0.1.headCount > 0 } }
        for (t, _) in more { h.engine.cancel(t) }
        for (t, _) in more { h.engine.cancel(t) }
        #expect(h.engine.deferredRemovals.count == n - TransferEngine.removalsPerTurn)
        #expect(try h.finish() == [])
        #expect(more.allSatisfy { $0.1.completions == 0 })
    }

    @Test func cancelFromInsideBodyCallback() throws {
        let h = try Harness()
        let r = Recorder()
        var calls = 0
        r.onBody = { t in
            calls += 1
            h.engine.cancel(t)
        }
        let (_, _) = try h.start(TransferRequest(url: h.url("/bytes/5000000")), r)
        h.run(seconds: 10) { calls > 0 }
        #expect(h.engine.activeTransfers == 0)
        h.idle(seconds: 0.3)
        #expect(calls == 1)
        #expect(r.completions == 0)
        #expect(r.order == ["head", "body"])
        #expect(try h.finish() == [])
    }

    @Test func cancelFromInsideHeadCallback() throws {
        let h = try Harness()
        let r = Recorder()
        r.onHead = { t in h.engine.cancel(t) }
        _ = try h.start(TransferRequest(url: h.url("/bytes/100000")), r)
        h.run(seconds: 10) { r.headCount > 0 }
        h.idle(seconds: 0.2)
        #expect(r.order == ["head"])
        #expect(h.engine.activeTransfers == 0)
        #expect(try h.finish() == [])
    }

    @Test func cancelWhilePausedWithResumePending() throws {
        let h = try Harness()
        let r = Recorder()
        r.accept = { _ in false }
        let (t, _) = try h.start(TransferRequest(url: h.url("/bytes/1000000")), r)
        h.run(seconds: 10) { t.isPaused }
        #expect(t.isPaused)
        t.resume()
        h.engine.cancel(t)
        h.idle(seconds: 0.2)
        #expect(r.completions == 0)
        #expect(r.bodyCalls == 0)
        #expect(try h.finish() == [])
    }

    /// A transfer whose completion is already queued inside libcurl when another
    /// transfer's callback cancels it is still silent.
    @Test func cancelOtherTransferFromCallback() throws {
        let h = try Harness()
        let victim = Recorder()
        let (victimTransfer, _) = try h.start(TransferRequest(url: h.url("/bytes/10")), victim)
        let killer = Recorder()
        killer.onHead = { _ in h.engine.cancel(victimTransfer) }
        _ = try h.start(TransferRequest(url: h.url("/bytes/10")), killer)
        h.run(seconds: 10) { killer.completions > 0 }
        h.idle(seconds: 0.1)
        #expect(killer.succeeded)
        // The victim may have completed before the killer's head; if not, it is silent.
        #expect(victim.completions == 0 || victim.order.last == "done")
        #expect(victim.completions <= 1)
        #expect(h.engine.activeTransfers == 0)
        #expect(try h.finish() == [])
    }

    /// Starting a new transfer from inside a callback works (the add waits until libcurl
    /// has returned), and so does starting one from a completion.
    @Test func startFromInsideCallbacks() throws {
        let h = try Harness()
        let second = Recorder(expectingSeed: 2)
        let third = Recorder(expectingSeed: 3)
        var keep: [Transfer] = []
        let first = Recorder()
        var startedSecond = false
        first.onBody = { _ in
            guard !startedSecond else { return }
            startedSecond = true
            let t = Transfer(request: TransferRequest(url: h.url("/bytes/70000?seed=2")), delegate: second)
            try? h.engine.start(t)
            keep.append(t)
        }
        first.onDone = { _ in
            let t = Transfer(request: TransferRequest(url: h.url("/bytes/70000?seed=3")), delegate: third)
            try? h.engine.start(t)
            keep.append(t)
        }
        _ = try h.start(TransferRequest(url: h.url("/bytes/300000")), first)
        h.run(seconds: 10) { second.completions > 0 && third.completions > 0 }
        #expect(first.succeeded)
        #expect(second.succeeded && second.checker?.matches(count: 70000) == true)
        #expect(third.succeeded && third.checker?.matches(count: 70000) == true)
        keep = []
        #expect(try h.finish() == [])
    }

    /// The transfer holds its delegate weakly: a delegate that goes away mid-transfer
    /// makes the engine abort it at the next callback, with no one left to tell.
    @Test func droppedDelegateAbortsTheTransfer() throws {
        let h = try Harness()
        var r: Recorder? = Recorder()
        var bodySeen = false
        r?.onBody = { _ in bodySeen = true }
        let t = Transfer(request: TransferRequest(url: h.url("/drip/100000?chunk=1000&delay=5")), delegate: r!)
        try h.engine.start(t)
        h.run(seconds: 10) { bodySeen }
        #expect(bodySeen)
        r = nil
        h.run(seconds: 10) { h.engine.activeTransfers == 0 }
        #expect(h.engine.activeTransfers == 0)
        #expect(t.delegate == nil)
        #expect(try h.finish() == [])
    }

    /// The same for a transfer stalled with no bytes moving: libcurl keeps calling the
    /// progress callback with unchanged figures, which looks for the delegate every few
    /// reports (`Transfer.delegateCheckInterval`).
    @Test func droppedDelegateAbortsAStalledTransfer() throws {
        let h = try Harness()
        var r: Recorder? = Recorder()
        var bodySeen = false
        r?.onBody = { _ in bodySeen = true }
        // One byte, then nothing for 100 s.
        let t = Transfer(request: TransferRequest(url: h.url("/drip/10?chunk=1&delay=100000")), delegate: r!)
        try h.engine.start(t)
        h.run(seconds: 10) { bodySeen }
        #expect(bodySeen)
        r = nil
        h.run(seconds: 30) { h.engine.activeTransfers == 0 }
        #expect(h.engine.activeTransfers == 0)
        #expect(t.delegate == nil)
        #expect(try h.finish() == [])
    }
}
