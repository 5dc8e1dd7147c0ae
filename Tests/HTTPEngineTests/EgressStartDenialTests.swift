import Testing
@testable import HTTPEngine

/// Check (1) at `start`: with the server's default policy (no patterns), a URL whose
/// host is a loopback or private IP literal — in every spelling libcurl accepts — ends
/// in a denial before any connection is attempted: the sentinel listening at the
/// address never sees one. Only literals are used, and nothing leaves the machine: the
/// check runs before libcurl is handed the transfer.
@Suite struct EgressStartDenialTests {
    /// Every spelling of a loopback address that libcurl (or `inet_aton` behind it)
    /// reads as one.
    @Test func loopbackInEverySpellingIsDeniedBeforeConnecting() throws {
        let h = try Harness(options: .with(EgressPolicy()))
        let v4 = try Sentinel()
        let v6 = try Sentinel(host: "::1")
        let p = v4.port, q = v6.port
        let cases: [(url: String, reason: String)] = [
            ("http://127.0.0.1:\(p)/", "127.0.0.1 is in the special-purpose range 127.0.0.0/8 (loopback)."),
            ("http://0177.0.0.1:\(p)/", "0177.0.0.1 means 127.0.0.1; 127.0.0.1 is in the special-purpose range 127.0.0.0/8 (loopback)."),
            ("http://2130706433:\(p)/", "2130706433 means 127.0.0.1; 127.0.0.1 is in the special-purpose range 127.0.0.0/8 (loopback)."),
            ("http://0x7f.1:\(p)/", "0x7f.1 means 127.0.0.1; 127.0.0.1 is in the special-purpose range 127.0.0.0/8 (loopback)."),
            ("http://127.1:\(p)/", "127.1 means 127.0.0.1; 127.0.0.1 is in the special-purpose range 127.0.0.0/8 (loopback)."),
            ("http://017700000001:\(p)/", "017700000001 means 127.0.0.1; 127.0.0.1 is in the special-purpose range 127.0.0.0/8 (loopback)."),
            ("http://0x7F000001:\(p)/", "0x7F000001 means 127.0.0.1; 127.0.0.1 is in the special-purpose range 127.0.0.0/8 (loopback)."),
            ("http://%31%32%37.0.0.1:\(p)/", "127.0.0.1 is in the special-purpose range 127.0.0.0/8 (loopback)."),
            ("http://user:pw@127.0.0.1:\(p)/", "127.0.0.1 is in the special-purpose range 127.0.0.0/8 (loopback)."),
            ("HTTP://127.0.0.1:\(p)/", "127.0.0.1 is in the special-purpose range 127.0.0.0/8 (loopback)."),
            ("http://[::1]:\(q)/", "::1 is in the special-purpose range ::1 (loopback)."),
            ("http://[0:0:0:0:0:0:0:1]:\(q)/", "::1 is in the special-purpose range ::1 (loopback)."),
            ("http://[::ffff:127.0.0.1]:\(p)/",
             "::ffff:127.0.0.1 embeds 127.0.0.1, which is in the special-purpose range 127.0.0.0/8 (loopback)."),
            ("http://[::ffff:7f00:1]:\(p)/",
             "[::ffff:7f00:1] means ::ffff:127.0.0.1; ::ffff:127.0.0.1 embeds 127.0.0.1, which is in the special-purpose range 127.0.0.0/8 (loopback)."),
        ]
        for c in cases {
            let r = try h.fetch(TransferRequest(url: c.url), seconds: 10)
            #expect(r.completions == 1, "\(c.url)")
            #expect(r.failure?.code == TransferFailure.egressDeniedCode, "\(c.url)")
            #expect(r.failure?.text == TransferFailure.egressDeniedPrefix + c.reason, "\(c.url)")
            #expect(r.headCount == 0 && r.bodyCount == 0, "\(c.url)")
        }
        #expect(v4.acceptedNothing)
        #expect(v6.acceptedNothing)
        #expect(try h.finish() == [])
    }

    /// Private, link-local (cloud metadata), CGNAT, ULA and unspecified literals: denied
    /// at start, so no packet is ever sent to them.
    @Test func privateAndOtherSpecialLiteralsAreDenied() throws {
        let h = try Harness(options: .with(EgressPolicy()))
        let cases: [(url: String, reason: String)] = [
            ("http://10.1.2.3/", "10.1.2.3 is in the special-purpose range 10.0.0.0/8 (private, RFC 1918)."),
            ("http://192.168.1.1:8080/", "192.168.1.1 is in the special-purpose range 192.168.0.0/16 (private, RFC 1918)."),
            ("http://172.16.0.1/", "172.16.0.1 is in the special-purpose range 172.16.0.0/12 (private, RFC 1918)."),
            ("http://169.254.169.254/latest/meta-data/",
             "169.254.169.254 is in the special-purpose range 169.254.0.0/16 (link-local, cloud metadata)."),
            ("http://100.64.0.1/", "100.64.0.1 is in the special-purpose range 100.64.0.0/10 (shared address space, CGNAT)."),
            ("http://0.0.0.0/", "0.0.0.0 is in the special-purpose range 0.0.0.0/8 (unspecified)."),
            ("https://[fd00::1]/", "fd00::1 is in the special-purpose range fc00::/7 (unique local, ULA)."),
            ("http://[fe80::1%25eth0]/", "fe80::1 is in the special-purpose range fe80::/10 (link-local)."),
            ("http://012.0.0.1/", "012.0.0.1 means 10.0.0.1; 10.0.0.1 is in the special-purpose range 10.0.0.0/8 (private, RFC 1918)."),
        ]
        for c in cases {
            let r = try h.fetch(TransferRequest(url: c.url), seconds: 10)
            #expect(r.completions == 1, "\(c.url)")
            #expect(r.failure?.text == TransferFailure.egressDeniedPrefix + c.reason, "\(c.url)")
            #expect(r.failure?.isEgressDenial == true, "\(c.url)")
        }
        #expect(try h.finish() == [])
    }

    /// A denied transfer completes on a later turn, never inside `start`, and a
    /// `cancel` before that turn silences it like any other transfer.
    @Test func denialCompletesLaterAndCancelSilencesIt() throws {
        let h = try Harness(options: .with(EgressPolicy()))
        let (t, r) = try h.start(TransferRequest(url: "http://10.0.0.1/"))
        #expect(r.completions == 0)
        #expect(h.engine.activeTransfers == 1)
        h.engine.cancel(t)
        h.idle(seconds: 0.1)
        #expect(r.completions == 0)
        #expect(h.engine.activeTransfers == 0)
        let (_, r2) = try h.start(TransferRequest(url: "http://10.0.0.1/"))
        h.run(seconds: 10) { r2.completions > 0 }
        #expect(r2.order == ["done"])
        #expect(try h.finish() == [])
    }
}
