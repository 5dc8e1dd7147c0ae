import Testing
@testable import HTTPEngine

/// `shutdown` aborts everything silently and closes every handle it opened, so the loop
/// can be closed afterwards.
@Suite struct ShutdownTests {
    @Test func shutdownWithTransfersInFlight() throws {
        let h = try Harness()
        var recorders: [Recorder] = []
        var transfers: [Transfer] = []
        for i in 0..<20 {
            let path = i % 2 == 0 ? "/hang" : "/drip/100000?chunk=10&delay=10"
            let (t, r) = try h.start(TransferRequest(url: h.url(path)))
            recorders.append(r)
            transfers.append(t)
        }
        h.run(seconds: 10) { recorders.contains { $0.bodyCount > 0 } }
        let seen = recorders.map(\.order)
        #expect(try h.finish() == [])  // shutdown, handles gone, loop closed
        #expect(recorders.map(\.order) == seen)
        #expect(recorders.allSatisfy { $0.completions == 0 })
        #expect(h.engine.activeTransfers == 0)
        // After shutdown: start refuses, cancel is harmless.
        #expect(throws: TransferFailure.self) { try h.engine.start(Transfer(request: TransferRequest(url: h.url("/")), delegate: Recorder())) }
        h.engine.cancel(transfers[0])
    }

    @Test func shutdownOfIdleEngineWithCachedConnections() throws {
        let h = try Harness()
        for _ in 0..<3 {
            let r = try h.fetch("/bytes/100")
            #expect(r.succeeded)
        }
        #expect(try h.finish() == [])
    }

    @Test func shutdownFromInsideCallback() throws {
        let h = try Harness()
        let r = Recorder()
        var shut = false
        r.onBody = { _ in h.engine.shutdown { shut = true } }
        _ = try h.start(TransferRequest(url: h.url("/bytes/1000000")), r)
        h.run(seconds: 10) { shut }
        #expect(shut)
        #expect(r.completions == 0)
        h.loop.run()
        #expect(h.loop.handleNames().isEmpty)
        try h.loop.close()
        h.upstream.stop()
    }

    /// A delegate may shut the engine down from a transfer's completion while others
    /// run: the others end silently and every handle closes. (`afterCurl` goes on after
    /// the completions and must not touch the freed multi then; libcurl is not
    /// instrumented, so no sanitizer sees such a read: `sizeConnectionCache` checks
    /// `isOpen` itself.)
    @Test func shutdownFromACompletion() throws {
        let h = try Harness()
        let first = Recorder()
        var shut = false
        first.onDone = { _ in h.engine.shutdown { shut = true } }
        _ = try h.start(TransferRequest(url: h.url("/bytes/10")), first)
        var others: [(Transfer, Recorder)] = []
        for _ in 0..<3 { others.append(try h.start(TransferRequest(url: h.url("/delay/5000")))) }
        h.run(seconds: 10) { shut }
        #expect(shut && first.completions == 1)
        others = []
        #expect(try h.finish() == [])  // a second shutdown waits for the handles to close
    }

    /// An engine dropped without shutdown does not leave its handles open.
    @Test func droppedEngineClosesItsHandles() throws {
        let h = try Harness()
        var engine: TransferEngine? = try TransferEngine(loop: h.loop)
        let r = Recorder()
        let t = Transfer(request: TransferRequest(url: h.url("/bytes/100")), delegate: r)
        try engine?.start(t)
        h.run(seconds: 10) { r.completions > 0 }
        engine = nil
        h.loop.run()
        #expect(try h.finish() == [])
    }
}
