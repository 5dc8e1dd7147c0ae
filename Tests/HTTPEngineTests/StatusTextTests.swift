import Testing
@testable import HTTPEngine

/// The status text is the reason phrase the server sent, or the standard phrase when the
/// status line has none.
@Suite struct StatusTextTests {
    @Test func reasonPhraseAsSent() throws {
        let h = try Harness()
        let r = try h.fetch(TransferRequest(url: h.url("/status/201?reason=Made%20It%20Here")))
        #expect(r.succeeded)
        #expect(r.head?.status == 201)
        #expect(r.head?.statusText == "Made It Here")
        #expect(r.bodyText == "status 201")
        #expect(try h.finish() == [])
    }

    @Test(arguments: [(200, "OK"), (404, "Not Found"), (418, ""), (503, "Service Unavailable")])
    func standardPhraseWhenNoneSent(code: Int, phrase: String) throws {
        let h = try Harness()
        let r = try h.fetch(TransferRequest(url: h.url("/no-reason/\(code)")))
        #expect(r.succeeded)
        #expect(r.head?.status == code)
        #expect(r.head?.statusText == phrase)
        #expect(try h.finish() == [])
    }

    /// A failing status is still a successful transfer: the body is the server's.
    @Test func errorStatusIsNotAFailure() throws {
        let h = try Harness()
        let r = try h.fetch(TransferRequest(url: h.url("/status/500")))
        #expect(r.succeeded)
        #expect(r.head?.status == 500)
        #expect(r.head?.statusText == "Internal Server Error")
        #expect(r.bodyText == "status 500")
        #expect(try h.finish() == [])
    }
}
