import Foundation
import Testing
@testable import HTTPEngine
import TestSupport

/// Both checks on every redirect hop: the hop's host is checked at the end of the 3xx
/// head, before libcurl follows it, and its addresses at connect time. A refused hop
/// never receives a connection (its sentinel's backlog stays empty).
@Suite struct EgressRedirectTests {
    /// `/redirect-to?url=…` on the upstream, with the target percent-encoded.
    static func redirect(_ h: Harness, to target: String, status: Int = 302) -> String {
        let encoded = target.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? target
        return h.url("/redirect-to?url=\(encoded)&status=\(status)")
    }

    /// An allowed upstream redirecting to a loopback address the policy does not
    /// allow: the transfer ends denied, and the target is never contacted.
    @Test func redirectToADeniedAddressIsNotFollowed() throws {
        let upstream = try Upstream()
        let h = try Harness(options: .with(.testing(allow: ["127.0.0.1:\(upstream.port)", "[::1]:\(upstream.port)"])),
                            upstream: upstream)
        let v4 = try Sentinel()
        let v6 = try Sentinel(host: "::1")
        for (target, why) in [
            (v4.url("/x"), "127.0.0.1:\(v4.port) matches no allow pattern."),
            (v6.url("/x"), "[::1]:\(v6.port) matches no allow pattern."),
            ("http://0x7f.1:\(v4.port)/", "127.0.0.1:\(v4.port) matches no allow pattern."),
        ] {
            let r = try h.fetch(TransferRequest(url: Self.redirect(h, to: target)), seconds: 10)
            #expect(r.completions == 1, "\(target)")
            #expect(r.denialReason == "the redirect to \(target) was refused: \(why)", "\(target)")
            #expect(r.headCount == 0, "\(target)")
        }
        #expect(v4.acceptedNothing)
        #expect(v6.acceptedNothing)
        #expect(try h.finish() == [])
    }

    /// A `Location` that cannot be read is the server's fault, said so: not a denial of
    /// the egress policy (which a client, and the metrics, would blame).
    @Test func anUnreadableLocationIsAnInvalidRedirectNotADenial() throws {
        let upstream = try Upstream()
        let h = try Harness(options: .with(.testing(allow: ["127.0.0.1:\(upstream.port)"])), upstream: upstream)
        let r = try h.fetch(TransferRequest(url: Self.redirect(h, to: "/a\tb")), seconds: 10)
        #expect(r.completions == 1)
        #expect(r.failure?.isEgressDenial == false)
        #expect(r.failure?.text.hasPrefix("Invalid redirect: the Location /a\tb cannot be read") == true,
                "\(String(describing: r.failure))")
        #expect(try h.finish() == [])
    }

    /// libcurl skips an empty `Location` and follows the first non-empty one: the check
    /// must judge that one, not stop at the empty header before it.
    @Test func anEmptyLocationDoesNotHideTheOneFollowed() throws {
        let upstream = try Upstream()
        let h = try Harness(options: .with(.testing(allow: ["127.0.0.1:\(upstream.port)"])), upstream: upstream)
        let v4 = try Sentinel()
        let target = v4.url("/x")
        let r = try h.fetch(TransferRequest(url: Self.redirect(h, to: target) + "&decoy=1"), seconds: 10)
        #expect(r.completions == 1)
        #expect(r.denialReason == "the redirect to \(target) was refused: 127.0.0.1:\(v4.port) matches no allow pattern.")
        #expect(v4.acceptedNothing)
        #expect(try h.finish() == [])
    }

    /// With the default policy's ranges (loopback allowed only at the upstream's port by
    /// IP), a redirect to `localhost` at another port passes check (1) by name and is
    /// refused at each address by check (2).
    @Test func redirectToANameResolvingToDeniedAddresses() throws {
        let upstream = try Upstream()
        let h = try Harness(options: .with(.testing(allow: ["127.0.0.1:\(upstream.port)", "localhost"])), upstream: upstream)
        let v4 = try Sentinel()
        let r = try h.fetch(TransferRequest(url: Self.redirect(h, to: "http://localhost:\(v4.port)/")), seconds: 10)
        let reason = r.denialReason ?? ""
        #expect(r.failure?.isEgressDenial == true, "\(String(describing: r.failure))")
        #expect(reason.hasPrefix("every address tried for localhost:\(v4.port) is denied: "), "\(reason)")
        #expect(reason.contains("127.0.0.1 is in the special-purpose range 127.0.0.0/8 (loopback)."))
        #expect(v4.acceptedNothing)
        #expect(try h.finish() == [])
    }

    /// Names are checked on every hop: two hops by allowed names are followed to the
    /// end, and a hop to a denied name stops the transfer.
    @Test func namesAreCheckedOnEveryHop() throws {
        let h = try Harness(options: .with(.testing(allow: ["*.localhost", "127.0.0.1"], deny: ["evil.localhost"])))
        let port = h.upstream.port
        let last = "http://b.localhost:\(port)/echo"
        let middle = "http://a.localhost:\(port)/redirect-to?url=\(last.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")"
        let (t, ok) = try h.start(TransferRequest(url: "http://a.localhost:\(port)/redirect-to?url=\(middle.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")"))
        h.run(seconds: 10) { ok.completions > 0 }
        #expect(ok.succeeded)
        #expect(ok.head?.status == 200)
        #expect(t.metrics?.redirectCount == 2)
        #expect(t.metrics?.effectiveURL == last)
        let evil = "http://EVIL.localhost:\(port)/echo"
        let r = try h.fetch(TransferRequest(url: "http://a.localhost:\(port)/redirect-to?url=\(evil.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")"), seconds: 10)
        #expect(r.denialReason == "the redirect to \(evil) was refused: evil.localhost:\(port) matches the deny pattern evil.localhost.")
        // A relative redirect stays on the allowed host and is followed.
        let relative = try h.fetch(TransferRequest(url: "http://a.localhost:\(port)/redirect/2"), seconds: 10)
        #expect(relative.succeeded)
        #expect(relative.bodyText == "done")
        #expect(try h.finish() == [])
    }

    /// Only http and https are spoken on redirects: `ftp:` and `file:` targets are
    /// refused by name, before libcurl would refuse them.
    @Test func otherSchemesAreRefused() throws {
        let h = try Harness(options: .with(.testing(allow: ["127.0.0.1"])))
        for target in ["ftp://127.0.0.1/x", "file:///etc/passwd", "gopher://127.0.0.1:70/"] {
            let scheme = String(target.prefix { $0 != ":" })
            let r = try h.fetch(TransferRequest(url: Self.redirect(h, to: target)), seconds: 10)
            #expect(r.denialReason == "the redirect to \(target) uses the scheme \"\(scheme)\"; only http and https are spoken.")
        }
        #expect(try h.finish() == [])
    }

    /// Not following redirects leaves the 3xx and its Location as the result, whatever
    /// the Location says: nothing is followed, so nothing is checked.
    @Test func unfollowedRedirectIsTheResultEvenToADeniedTarget() throws {
        let h = try Harness(options: .with(.testing(allow: ["127.0.0.1"])))
        var req = TransferRequest(url: Self.redirect(h, to: "http://10.0.0.1/", status: 301))
        req.followRedirects = false
        let r = try h.fetch(req, seconds: 10)
        #expect(r.succeeded)
        #expect(r.head?.status == 301)
        #expect(r.head?.value(of: "location") == "http://10.0.0.1/")
        #expect(try h.finish() == [])
    }

    /// The hop limit still applies, and past it nothing is checked: libcurl stops with
    /// its own error.
    @Test func hopLimitComesBeforeTheCheck() throws {
        let h = try Harness(options: .with(.testing(allow: ["127.0.0.1"])))
        var req = TransferRequest(url: h.url("/redirect/3"))
        req.maxRedirects = 1
        let r = try h.fetch(req, seconds: 10)
        #expect(r.failure?.code == 47)  // CURLE_TOO_MANY_REDIRECTS
        #expect(try h.finish() == [])
    }
}
