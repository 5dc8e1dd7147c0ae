import Testing
@testable import HTTPEngine
import TestSupport

/// `Secure` cookies travel only in a secure context — libcurl's rule, checked once here.
/// libcurl counts `localhost`, 127.0.0.1 and ::1 as secure even over http, so the
/// upstream listens on 127.0.0.2 (loopback too, but not on that list).
@Suite struct CookieSecureTests {
    @Test func secureCookiesAreNotSentOrStoredOverPlainHTTP() throws {
        let h = try Harness()
        let plain = try Upstream(host: "127.0.0.2")
        defer { plain.stop() }
        let jar = try CookieJar()
        try jar.add(Cookie(domain: "127.0.0.2", secure: true, name: "secret", value: "1"))
        try jar.add(Cookie(domain: "127.0.0.2", name: "open", value: "2"))
        var r = TransferRequest(url: plain.url("/cookies"))
        r.cookieJar = jar
        #expect(json(try h.fetch(r)) as? [String: String] == ["open": "2"])
        // A server on plain http cannot set a Secure cookie either.
        r.url = plain.url("/set-cookie?name=fromServer&value=3&secure")
        let set = try h.fetch(r)
        #expect(set.head?.value(of: "set-cookie") == "fromServer=3; Path=/; Secure")
        #expect(!jar.cookies.map(\.name).contains("fromServer"))
        #expect(try h.finish() == [])
    }
}
