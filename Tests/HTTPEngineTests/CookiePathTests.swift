import Testing
@testable import HTTPEngine

/// A cookie goes only to URLs under its Path.
@Suite struct CookiePathTests {
    @Test func aCookieIsSentOnlyUnderItsPath() throws {
        let h = try Harness()
        let jar = try CookieJar()
        var r = TransferRequest(url: h.url("/set-cookie?name=here&value=1&path=/cookies"))
        r.cookieJar = jar
        _ = try h.fetch(r)
        r.url = h.url("/set-cookie?name=elsewhere&value=2&path=/other")
        _ = try h.fetch(r)
        r.url = h.url("/cookies")
        #expect(json(try h.fetch(r)) as? [String: String] == ["here": "1"])
        #expect(Set(jar.cookies.map(\.path)) == ["/cookies", "/other"])
        #expect(try h.finish() == [])
    }
}
