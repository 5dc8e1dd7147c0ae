import Testing
@testable import HTTPEngine
import TestSupport

/// Check (2) in the open-socket callback, on the addresses a name resolves to, and the
/// operator's patterns. libcurl resolves `localhost` and `*.localhost` itself, to both
/// 127.0.0.1 and ::1 (whatever /etc/hosts says), which gives real names with one IPv4
/// and one IPv6 loopback address without touching the system's resolver.
@Suite struct EgressConnectTests {
    /// The default policy lets the name through check (1) and refuses each address it
    /// resolves to at connect time; the denial names every address and its range.
    @Test func localhostIsDeniedAtEveryAddress() throws {
        let h = try Harness(options: .with(EgressPolicy()))
        let v4 = try Sentinel()
        let r = try h.fetch(TransferRequest(url: "http://localhost:\(v4.port)/"), seconds: 10)
        #expect(r.completions == 1)
        let reason = r.denialReason ?? ""
        #expect(reason.hasPrefix("every address tried for localhost:\(v4.port) is denied: "))
        #expect(reason.contains("127.0.0.1 is in the special-purpose range 127.0.0.0/8 (loopback)."))
        #expect(reason.contains("::1 is in the special-purpose range ::1 (loopback)."))
        #expect(v4.acceptedNothing)
        #expect(try h.finish() == [])
    }

    /// A name with one allowed and one denied address works through the allowed one:
    /// refusing ::1 makes libcurl go on to 127.0.0.1.
    @Test func nameConnectsThroughItsAllowedAddress() throws {
        let h = try Harness(options: .with(.testing(allow: ["localhost", "127.0.0.1"])))
        let r = try h.fetch(TransferRequest(url: "http://localhost:\(h.upstream.port)/echo"), seconds: 10)
        #expect(r.succeeded)
        #expect(r.head?.status == 200)
        #expect(try h.finish() == [])
    }

    /// With only IPv4 loopback allowed, the IPv6 address of `localhost` stays out even
    /// though a server listens there: libcurl tries both, the ::1 socket is never made,
    /// and the failure is 127.0.0.1's refusal (nobody listens on it at that port).
    @Test func onlyIPv4AllowedKeepsIPv6Out() throws {
        let h = try Harness(options: .with(.testing(allow: ["localhost", "127.0.0.1"])))
        let v6 = try Sentinel(host: "::1")
        // Hold 127.0.0.1 at the same port without listening, so its refusal is certain.
        let v4 = try Sentinel.closedPort(host: "127.0.0.1", port: v6.port)
        let r = try h.fetch(TransferRequest(url: "http://localhost:\(v6.port)/"), seconds: 10)
        #expect(r.completions == 1)
        #expect(r.failure?.code == 7)  // CURLE_COULDNT_CONNECT: one address was allowed and refused
        #expect(v6.acceptedNothing)
        withExtendedLifetime(v4) {}
        #expect(try h.finish() == [])
    }

    /// A deny pattern wins over an allow pattern covering the same address.
    @Test func denyWinsOverAllow() throws {
        let h = try Harness(options: .with(.testing(allow: ["127.0.0.0/8", "localhost"], deny: ["127.0.0.1"])))
        let v4 = try Sentinel()
        let r = try h.fetch(TransferRequest(url: h.url("/echo")), seconds: 10)
        #expect(r.denialReason == "127.0.0.1:\(h.upstream.port) matches the deny pattern 127.0.0.1.")
        // By name, check (1) passes and check (2) refuses 127.0.0.1; ::1 is not allowed.
        let byName = try h.fetch(TransferRequest(url: "http://localhost:\(v4.port)/"), seconds: 10)
        let reason = byName.denialReason ?? ""
        #expect(reason.contains("127.0.0.1:\(v4.port) matches the deny pattern 127.0.0.1."))
        #expect(reason.contains("::1 is in the special-purpose range ::1 (loopback)."))
        #expect(v4.acceptedNothing)
        #expect(try h.finish() == [])
    }

    /// A pattern with a port admits (or denies) that port only.
    @Test func portSpecificPatterns() throws {
        let upstream = try Upstream()
        let v4 = try Sentinel()
        let allowed = try Harness(options: .with(.testing(allow: ["127.0.0.1:\(upstream.port)"])), upstream: upstream)
        let ok = try allowed.fetch(TransferRequest(url: upstream.url("/echo")), seconds: 10)
        #expect(ok.succeeded)
        let other = try allowed.fetch(TransferRequest(url: v4.url()), seconds: 10)
        #expect(other.denialReason == "127.0.0.1:\(v4.port) matches no allow pattern.")
        #expect(v4.acceptedNothing)
        #expect(try allowed.finish() == [])

        let upstream2 = try Upstream()
        let closed = try Sentinel.closedPort(host: "127.0.0.1")
        let denied = try Harness(options: .with(.testing(allow: ["127.0.0.0/8"], deny: ["127.0.0.1:\(upstream2.port)"])),
                                 upstream: upstream2)
        let refused = try denied.fetch(TransferRequest(url: upstream2.url("/echo")), seconds: 10)
        #expect(refused.denialReason == "127.0.0.1:\(upstream2.port) matches the deny pattern 127.0.0.1:\(upstream2.port).")
        // Another port of the same address is not denied: libcurl connects, and is refused.
        let elsewhere = try denied.fetch(TransferRequest(url: "http://127.0.0.1:\(closed.port)/"), seconds: 10)
        #expect(elsewhere.failure?.code == 7)
        #expect(try denied.finish() == [])
    }

    /// `*.suffix` patterns match subdomains at any depth, not the domain itself.
    @Test func wildcardNames() throws {
        let h = try Harness(options: .with(.testing(allow: ["*.localhost", "127.0.0.1"], deny: ["*.evil.localhost"])))
        let port = h.upstream.port
        let ok = try h.fetch(TransferRequest(url: "http://api.localhost:\(port)/echo"), seconds: 10)
        #expect(ok.succeeded)
        let deep = try h.fetch(TransferRequest(url: "http://a.b.localhost:\(port)/echo"), seconds: 10)
        #expect(deep.succeeded)
        let bare = try h.fetch(TransferRequest(url: "http://localhost:\(port)/echo"), seconds: 10)
        #expect(bare.denialReason == "localhost:\(port) matches no allow pattern.")
        let evil = try h.fetch(TransferRequest(url: "http://www.EVIL.localhost.:\(port)/echo"), seconds: 10)
        #expect(evil.denialReason == "www.evil.localhost:\(port) matches the deny pattern *.evil.localhost.")
        #expect(try h.finish() == [])
    }
}
