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
