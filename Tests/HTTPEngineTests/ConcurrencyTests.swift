import Testing
@testable import HTTPEngine

/// Many transfers at once on one loop all complete, each with its own exact body.
@Suite struct ConcurrencyTests {
    @Test func twoHundredConcurrentTransfers() throws {
        let h = try Harness()
        var pairs: [(Transfer, Recorder, Int)] = []
        for i in 0..<200 {
            let size = 1000 + i * 397
            let (t, r) = try h.start(TransferRequest(url: h.url("/bytes/\(size)?seed=\(i % 251)")), Recorder(expectingSeed: i % 251))
            pairs.append((t, r, size))
        }
        #expect(h.engine.activeTransfers == 200)
        h.run(seconds: 60) { pairs.allSatisfy { $0.1.completions > 0 } }
        for (_, r, size) in pairs {
            #expect(r.succeeded, "\(String(describing: r.failure))")
            #expect(r.checker?.matches(count: size) == true)
            #expect(r.order == ["head", "body", "done"])
        }
        #expect(h.engine.activeTransfers == 0)
        pairs = []
        #expect(try h.finish() == [])
    }

    /// A request that never answers does not hold up others to the same host (libcurl's
    /// PIPEWAIT would make them wait for its response on cleartext HTTP).
    @Test func hangingRequestDoesNotBlockTheHost() throws {
        let h = try Harness()
        let (hanging, hangRecorder) = try h.start(TransferRequest(url: h.url("/hang")))
        let (_, r) = try h.start(TransferRequest(url: h.url("/bytes/10")))
        h.run(seconds: 5) { r.completions > 0 }
        #expect(r.succeeded)
        #expect(hangRecorder.completions == 0)
        h.engine.cancel(hanging)
        #expect(try h.finish() == [])
    }
}
