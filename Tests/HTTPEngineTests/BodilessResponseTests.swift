import Testing
@testable import HTTPEngine

/// Responses without a body (HEAD, 204, 304) still get their head, delivered at
/// completion, just before the completion itself, with no body call at all.
@Suite struct BodilessResponseTests {
    @Test func headRequestDeliversHeadAtCompletion() throws {
        let h = try Harness()
        let r = try h.fetch(TransferRequest(method: "HEAD", url: h.url("/bytes/5000")))
        #expect(r.succeeded, "\(String(describing: r.failure))")
        #expect(r.order == ["head", "done"])
        #expect(r.head?.status == 200)
        #expect(r.head?.value(of: "content-length") == "5000")
        #expect(r.bodyCalls == 0)
        #expect(try h.finish() == [])
    }

    @Test(arguments: [204, 304])
    func statusWithoutBodyDeliversHeadAtCompletion(code: Int) throws {
        let h = try Harness()
        let r = try h.fetch(TransferRequest(url: h.url("/status/\(code)")))
        #expect(r.succeeded, "\(String(describing: r.failure))")
        #expect(r.order == ["head", "done"])
        #expect(r.head?.status == code)
        #expect(r.head?.statusText == (code == 204 ? "No Content" : "Not Modified"))
        #expect(r.bodyCalls == 0)
        #expect(try h.finish() == [])
    }
}
