import Testing
@testable import HTTPEngine

/// Transfers that carry the same jar share cookies; a transfer with another jar, or with
/// none, neither sees nor adds to them — also when it runs on a pooled easy handle that
/// the previous transfer left attached to a jar.
@Suite struct CookieSharingTests {
    private func request(_ h: Harness, _ path: String, jar: CookieJar?) -> TransferRequest {
        var r = TransferRequest(url: h.url(path))
        r.cookieJar = jar
        return r
    }

    @Test func aCookieSetByOneTransferIsSentByTheNextWithTheSameJar() throws {
        let h = try Harness()
        let jar = try CookieJar()
        let set = try h.fetch(request(h, "/set-cookie?name=session&value=abc", jar: jar))
        #expect(set.succeeded)
        #expect(set.head?.value(of: "set-cookie") == "session=abc; Path=/")
        let sent = try h.fetch(request(h, "/cookies", jar: jar))
        #expect(sent.succeeded)
        #expect(json(sent) as? [String: String] == ["session": "abc"])
        #expect(jar.cookies.map(\.name) == ["session"])
        #expect(try h.finish() == [])
    }

    @Test func anotherJarOrNoJarSeesNothing() throws {
        let h = try Harness()
        let jar = try CookieJar()
        let other = try CookieJar()
        _ = try h.fetch(request(h, "/set-cookie?name=a&value=1", jar: jar))
        let viaOther = try h.fetch(request(h, "/cookies", jar: other))
        #expect(viaOther.succeeded)
        #expect(json(viaOther).isEmpty)
        // The handle that ran the first transfer is back in the pool, reset: it was
        // detached from the jar, so a transfer without cookies sends none …
        let viaNone = try h.fetch(request(h, "/cookies", jar: nil))
        #expect(viaNone.succeeded)
        #expect(json(viaNone).isEmpty)
        // … and a cookie set to a transfer without a jar is stored nowhere.
        _ = try h.fetch(request(h, "/set-cookie?name=b&value=2", jar: nil))
        let again = try h.fetch(request(h, "/cookies", jar: jar))
        #expect(json(again) as? [String: String] == ["a": "1"])
        #expect(other.cookies.isEmpty)
        #expect(try h.finish() == [])
    }

    /// Cookies set on a redirect hop are sent on the next hop (libcurl's cookie engine
    /// runs per hop), and a cookie added by hand is sent like one a server set.
    @Test func cookiesAddedByHandAreSent() throws {
        let h = try Harness()
        let jar = try CookieJar()
        try jar.add(Cookie(domain: "127.0.0.1", path: "/", name: "manual", value: "yes"))
        let sent = try h.fetch(request(h, "/cookies", jar: jar))
        #expect(json(sent) as? [String: String] == ["manual": "yes"])
        jar.removeAll()
        #expect(jar.cookies.isEmpty)
        let none = try h.fetch(request(h, "/cookies", jar: jar))
        #expect(json(none).isEmpty)
        #expect(try h.finish() == [])
    }

    /// An easy handle attached to a jar keeps it alive; once the transfer is done and the
    /// handle reset, nothing holds the jar and it is freed (`curl_share_cleanup` would
    /// refuse a share that still had a handle).
    @Test func aJarIsFreedOnceNoHandleUsesIt() throws {
        let h = try Harness()
        weak var weakJar: CookieJar?
        try {
            let jar = try CookieJar()
            weakJar = jar
            let r = try h.fetch(request(h, "/set-cookie?name=a&value=1", jar: jar))
            #expect(r.succeeded)
        }()
        #expect(weakJar == nil)
        // The pooled handle that used it still works, without cookies.
        let after = try h.fetch(request(h, "/cookies", jar: nil))
        #expect(after.succeeded)
        #expect(json(after).isEmpty)
        #expect(try h.finish() == [])
    }
}
