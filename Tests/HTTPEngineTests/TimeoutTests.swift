import Testing
@testable import HTTPEngine

/// The whole-transfer timeout ends a request that never answers.
@Suite struct TimeoutTests {
    @Test func hangingUpstreamTimesOut() throws {
        let h = try Harness()
        var req = TransferRequest(url: h.url("/hang"))
        req.timeout = 0.5
        let (t, r) = try h.start(req)
        let started = h.loop.now
        h.run(seconds: 10) { r.completions > 0 }
        let elapsed = h.loop.now - started
        #expect(r.completions == 1)
        #expect(r.failure?.code == 28)  // CURLE_OPERATION_TIMEDOUT
        #expect(r.failure?.text.contains("timed out") == true, "\(String(describing: r.failure))")
        #expect(r.order == ["done"])
        #expect(elapsed >= 450 && elapsed < 3000, "\(elapsed) ms")
        withExtendedLifetime(t) {}
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
