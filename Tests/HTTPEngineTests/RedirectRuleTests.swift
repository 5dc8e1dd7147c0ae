import Testing
@testable import HTTPEngine

/// `RedirectRule` on its own (RFC 9110 §15.4, Fetch's HTTP-redirect fetch): every
/// method × every followed code, the headers that leave with the body, and the
/// credentials that stay on the caller's origin. No I/O; `RedirectTests` and the
/// Python `test_wire.py` check the same rules on the wire.
@Suite struct RedirectRuleTests {
    static let methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "PROPFIND"]

    func request(_ method: String) -> TransferRequest {
        var r = TransferRequest(method: method, url: "http://a.test/start")
        if method != "GET" && method != "HEAD" { r.body = .bytes(Array("body".utf8)) }
        r.headers = [("Content-Type", "text/plain"), ("Content-Language", "en"), ("Authorization", "Bearer t"),
                     ("Cookie", "c=1"), ("X-Kept", "1")]
        r.user = "u"
        r.password = "p"
        return r
    }

    /// What RFC 9110 says each pair becomes: (method, body kept).
    func expected(_ method: String, _ status: Int) -> (String, Bool) {
        let hasBody = method != "GET" && method != "HEAD"
        switch status {
        case 303 where method != "GET" && method != "HEAD": return ("GET", false)
        case 301 where method == "POST", 302 where method == "POST": return ("GET", false)
        default: return (method, hasBody)
        }
    }

    @Test(arguments: methods, [301, 302, 303, 307, 308])
    func methodAndBody(method: String, status: Int) {
        let original = request(method)
        let next = RedirectRule.nextHop(after: status, to: "http://a.test/next", previous: original,
                                        original: original, sameOrigin: true)
        let (wantMethod, keepsBody) = expected(method, status)
        #expect(next.method == wantMethod)
        #expect(next.url == "http://a.test/next")
        #expect(next.body.isNone == !keepsBody)
        let names = next.headers.map { $0.name }
        if keepsBody || method == "GET" || method == "HEAD" {
            #expect(names == ["Content-Type", "Content-Language", "Authorization", "Cookie", "X-Kept"])
        } else {
            #expect(names == ["Authorization", "Cookie", "X-Kept"], "the body's headers leave with it")
        }
        #expect(next.user == "u" && next.password == "p")
    }

    @Test func onlyTheFiveCodesAreFollowed() {
        #expect(RedirectRule.followedCodes == [301, 302, 303, 307, 308])
    }

    /// Another origin gets neither the credentials nor Authorization and Cookie; a
    /// later hop back to the caller's origin gets them again.
    @Test func credentialsStayOnTheCallersOrigin() {
        let original = request("PUT")
        let away = RedirectRule.nextHop(after: 307, to: "http://b.test/", previous: original, original: original,
                                        sameOrigin: false)
        #expect(away.user == nil && away.password == nil)
        #expect(away.headers.map { $0.name } == ["Content-Type", "Content-Language", "X-Kept"])
        #expect(away.method == "PUT" && !away.body.isNone)
        let back = RedirectRule.nextHop(after: 308, to: "http://a.test/", previous: away, original: original,
                                        sameOrigin: true)
        #expect(back.user == "u")
        #expect(back.headers.count == 5)
    }

    /// Once a hop turned the request into a GET, later 307/308 hops keep it a GET
    /// without a body.
    @Test func aGETStaysAGET() {
        let original = request("POST")
        let first = RedirectRule.nextHop(after: 302, to: "http://a.test/1", previous: original, original: original,
                                         sameOrigin: true)
        let second = RedirectRule.nextHop(after: 307, to: "http://a.test/2", previous: first, original: original,
                                          sameOrigin: true)
        #expect(second.method == "GET")
        #expect(second.body.isNone)
        #expect(!second.headers.contains { $0.name == "Content-Type" })
    }
}

/// `ResponseHead.framing`: RFC 9112 §6.3's rules for Content-Length, on heads made by
/// hand.
@Suite struct ResponseFramingTests {
    func head(_ headers: [(String, String)]) -> ResponseHead {
        ResponseHead(status: 200, statusText: "OK", headers: HeaderFields(headers.map { (name: $0.0, value: $0.1) }), httpVersion: "1.1")
    }

    @Test func validLengths() {
        #expect(head([]).framing == .valid)
        #expect(head([("Content-Length", "5")]).framing == .valid)
        #expect(head([("content-length", "5"), ("CONTENT-LENGTH", "5")]).framing == .valid)
        #expect(head([("Content-Length", "5, 5")]).framing == .valid)
        #expect(head([("Content-Length", " 0 ")]).framing == .valid)
    }

    @Test func differingLengths() {
        #expect(head([("Content-Length", "2"), ("Content-Length", "5")]).framing
            == .invalid("Content-Length values differ (2; 5)"))
        #expect(head([("Content-Length", "2, 5")]).framing == .invalid("Content-Length values differ (2, 5)"))
    }

    @Test(arguments: ["abc", "-1", "5x", "", "1 2", "0x10", "+5", "99999999999999999999", "5,", ",5"])
    func notANumber(value: String) {
        #expect(head([("Content-Length", value)]).framing == .invalid("Content-Length \"\(value)\" is not a number"))
    }

    @Test func transferEncodingWithLength() {
        #expect(head([("Transfer-Encoding", "chunked"), ("Content-Length", "5")]).framing == .transferEncodingAndLength)
        #expect(head([("Transfer-Encoding", "chunked")]).framing == .valid)
    }
}
