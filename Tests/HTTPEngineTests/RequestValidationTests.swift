import Testing
@testable import HTTPEngine

/// Requests the engine cannot send are refused by `start` with a TransferFailure, and
/// the delegate hears nothing.
@Suite struct RequestValidationTests {
    func refused(_ h: Harness, _ req: TransferRequest) -> TransferFailure? {
        let r = Recorder()
        let t = Transfer(request: req, delegate: r)
        do {
            try h.engine.start(t)
            return nil
        } catch {
            #expect(r.order == [])
            return error as? TransferFailure
        }
    }

    @Test func badURLsAndSchemes() throws {
        let h = try Harness()
        #expect(refused(h, TransferRequest(url: "not a url"))?.code == 3)
        #expect(refused(h, TransferRequest(url: "http://"))?.code == 3)
        let ftp = refused(h, TransferRequest(url: "ftp://127.0.0.1/file"))
        #expect(ftp?.code == 1)
        #expect(ftp?.text == "Protocol \"ftp\" not supported: only http and https are allowed")
        #expect(refused(h, TransferRequest(url: "file:///etc/passwd"))?.code == 1)
        #expect(refused(h, TransferRequest(url: "gopher://127.0.0.1/"))?.code == 1)
        #expect(h.engine.activeTransfers == 0)
        #expect(try h.finish() == [])
    }

    @Test func badHeadersMethodsAndLimits() throws {
        let h = try Harness()
        var req = TransferRequest(url: h.url("/"))
        req.headers = [("X-Bad", "a\r\nInjected: yes")]
        #expect(refused(h, req)?.code == 43)
        req.headers = [("Bad Name", "x")]
        #expect(refused(h, req)?.code == 43)
        req = TransferRequest(method: "GET /x", url: h.url("/"))
        #expect(refused(h, req)?.code == 43)
        req = TransferRequest(url: h.url("/"))
        req.timeout = -1
        #expect(refused(h, req)?.code == 43)
        #expect(h.engine.activeTransfers == 0)
        // The engine still works after refusals (handles went back to the pool).
        #expect(try h.fetch("/bytes/10").succeeded)
        #expect(try h.finish() == [])
    }

    @Test func transferRunsOnlyOnce() throws {
        let h = try Harness()
        let r = Recorder()
        let t = Transfer(request: TransferRequest(url: h.url("/bytes/10")), delegate: r)
        try h.engine.start(t)
        #expect(throws: TransferFailure.self) { try h.engine.start(t) }
        h.run(seconds: 10) { r.completions > 0 }
        #expect(throws: TransferFailure.self) { try h.engine.start(t) }
        #expect(r.completions == 1)
        #expect(try h.finish() == [])
    }
}
