import Testing
@testable import HTTPEngine

/// Redirects are followed by default (the head is the final response's) and, when not
/// followed, the 3xx response is the result with its Location visible.
@Suite struct RedirectTests {
    @Test func followedRedirectsEndAtTheFinalResponse() throws {
        let h = try Harness()
        let (t, r) = try h.start(TransferRequest(url: h.url("/redirect/3")))
        h.run(seconds: 10) { r.completions > 0 }
        #expect(r.succeeded, "\(String(describing: r.failure))")
        #expect(r.headCount == 1)
        #expect(r.head?.status == 200)
        #expect(r.head?.value(of: "location") == nil)
        #expect(r.bodyText == "done")
        #expect(t.metrics?.redirectCount == 3)
        #expect(t.metrics?.effectiveURL == h.url("/redirect/0"))
        #expect(try h.finish() == [])
    }

    @Test func unfollowedRedirectIsTheResult() throws {
        let h = try Harness()
        var req = TransferRequest(url: h.url("/redirect/2"))
        req.followRedirects = false
        let r = try h.fetch(req)
        #expect(r.succeeded)
        #expect(r.head?.status == 302)
        #expect(r.head?.statusText == "Found")
        #expect(r.head?.value(of: "Location") == "/redirect/1")
        #expect(r.bodyCount == 0)
        #expect(try h.finish() == [])
    }

    @Test func tooManyRedirectsFail() throws {
        let h = try Harness()
        var req = TransferRequest(url: h.url("/redirect/5"))
        req.maxRedirects = 2
        let r = try h.fetch(req)
        #expect(r.completions == 1)
        #expect(r.failure?.code == 47)  // CURLE_TOO_MANY_REDIRECTS
        #expect(r.headCount == 0)
        #expect(try h.finish() == [])
    }

    /// Only http and https are followed: a redirect to another scheme fails.
    @Test func redirectToOtherSchemeIsRefused() throws {
        let h = try Harness()
        let r = try h.fetch(TransferRequest(url: h.url("/redirect-to?url=ftp%3A%2F%2F127.0.0.1%2Fx&status=302")))
        #expect(r.completions == 1)
        #expect(r.failure?.code == 1)  // CURLE_UNSUPPORTED_PROTOCOL
        #expect(try h.finish() == [])
    }

    /// POST after 303 becomes GET (libcurl's default, as browsers do).
    @Test func postAfter303BecomesGet() throws {
        let h = try Harness()
        var req = TransferRequest(method: "POST", url: h.url("/redirect-to?url=%2Fecho&status=303"))
        req.body = .bytes(Array("a=1".utf8))
        let r = try h.fetch(req)
        #expect(r.succeeded)
        #expect(json(r)["method"] as? String == "GET")
        #expect(json(r)["bodyLength"] as? Int == 0)
        #expect(try h.finish() == [])
    }
}
