#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import HTTPEngine

/// Max-Age makes a cookie persistent with an expiry libcurl computes from the clock; no
/// Max-Age makes a session cookie (expiry 0); Max-Age=0 removes the cookie.
@Suite struct CookieExpiryTests {
    @Test func maxAgeSetsTheExpiryAndZeroRemoves() throws {
        let h = try Harness()
        let jar = try CookieJar()
        var r = TransferRequest(url: h.url("/set-cookie?name=keep&value=1&max_age=3600"))
        r.cookieJar = jar
        let before = Int64(time(nil))
        _ = try h.fetch(r)
        r.url = h.url("/set-cookie?name=sess&value=2")
        _ = try h.fetch(r)
        let after = Int64(time(nil))
        let byName = Dictionary(uniqueKeysWithValues: jar.cookies.map { ($0.name, $0) })
        let keep = try #require(byName["keep"])
        #expect(keep.expires >= before + 3600 && keep.expires <= after + 3600)
        #expect(!keep.isSession)
        #expect(byName["sess"]?.isSession == true)

        r.url = h.url("/set-cookie?name=keep&value=gone&max_age=0")
        _ = try h.fetch(r)
        #expect(jar.cookies.map(\.name) == ["sess"])
        r.url = h.url("/cookies")
        #expect(json(try h.fetch(r)) as? [String: String] == ["sess": "2"])
        #expect(try h.finish() == [])
    }

    /// A cookie whose expiry has passed is neither listed nor sent.
    @Test func expiredCookiesAreNotSent() throws {
        let h = try Harness()
        let jar = try CookieJar()
        try jar.add(Cookie(domain: "127.0.0.1", expires: Int64(time(nil)) - 10, name: "old", value: "x"))
        try jar.add(Cookie(domain: "127.0.0.1", expires: Int64(time(nil)) + 600, name: "new", value: "y"))
        #expect(jar.cookies.map(\.name) == ["new"])
        var r = TransferRequest(url: h.url("/cookies"))
        r.cookieJar = jar
        #expect(json(try h.fetch(r)) as? [String: String] == ["new": "y"])
        #expect(try h.finish() == [])
    }
}
