import Foundation
import Testing
@testable import HTTPEngine
import TestSupport

/// Forward proxies with Basic, Digest and NTLM (proxy.py verifies NTLMv2): http goes in
/// absolute form, https through a CONNECT tunnel with the origin's certificate
/// verified inside it. A proxy's refusal is a response for http and a failure for https.
@Suite struct ProxyTests {
    static let schemes: [(AuthScheme, [String])] = [
        (.basic, ["--auth", "basic"]), (.digest, ["--auth", "digest"]),
        (.digest, ["--auth", "digest", "--digest-algorithm", "SHA-256"]), (.ntlm, ["--auth", "ntlm"]),
    ]

    static func proxy(_ args: [String]) throws -> Upstream {
        try Upstream(script: Upstream.proxyScript, arguments: ["--user", "pu", "--password", "pp"] + args)
    }

    static func settings(_ p: Upstream, _ auth: AuthScheme, password: String = "pp") -> ProxySettings {
        ProxySettings(host: "127.0.0.1", port: p.port, user: "pu", password: password, auth: auth)
    }

    /// The proxy's records (`GET /log?clear=1`, fetched directly).
    static func log(_ h: Harness, _ p: Upstream) throws -> [[String: Any]] {
        let r = try h.fetch(TransferRequest(url: p.url("/log?clear=1")))
        return (try? JSONSerialization.jsonObject(with: Data(r.body))) as? [[String: Any]] ?? []
    }

    @Test(arguments: schemes)
    func httpThroughTheProxy(auth: AuthScheme, args: [String]) throws {
        let p = try Self.proxy(args)
        defer { p.stop() }
        let h = try Harness()
        var req = TransferRequest(url: h.url("/echo"))
        req.proxy = Self.settings(p, auth)
        let r = try h.fetch(req)
        #expect(r.succeeded, "\(String(describing: r.failure))")
        #expect(r.head?.status == 200)
        #expect((json(r)["headers"] as? [String: Any])?["via"] as? String == "1.1 xhrpc-proxy")
        let records = try Self.log(h, p)
        #expect(records.last?["authenticated"] as? Bool == true)
        #expect(records.last?["method"] as? String == "GET")
        #expect(try h.finish() == [])
    }

    @Test(arguments: schemes)
    func httpsThroughATunnelIsVerified(auth: AuthScheme, args: [String]) throws {
        let p = try Self.proxy(args)
        defer { p.stop() }
        let h = try Harness(options: TestCertificates.trustingTestCA,
                            upstreamArguments: TestCertificates.serving("good_cert", "good_key"))
        var req = TransferRequest(url: h.httpsURL("/echo"))
        req.proxy = Self.settings(p, auth)
        let r = try h.fetch(req)
        #expect(r.succeeded, "\(String(describing: r.failure))")
        #expect(r.head?.status == 200)
        #expect((json(r)["tls"] as? [String: Any])?["version"] as? String == "TLSv1.3")
        let records = try Self.log(h, p)
        #expect(records.last?["method"] as? String == "CONNECT")
        #expect(records.last?["authenticated"] as? Bool == true)
        #expect(try h.finish() == [])
    }

    /// The engine's User-Agent (a line of the request's own list, not libcurl's option)
    /// reaches the origin once, through a tunnel as in absolute form, and the CONNECT
    /// that opens the tunnel carries it too (from the option, which only a request
    /// through a proxy sets); a request that names its own sends only that one.
    @Test func theUserAgentGoesOnceToTheOriginAndToTheTunnel() throws {
        let p = try Self.proxy(["--auth", "basic"])
        defer { p.stop() }
        var options = TestCertificates.trustingTestCA
        options.userAgent = "engine-ua/1"
        let h = try Harness(options: options, upstreamArguments: TestCertificates.serving("good_cert", "good_key"))
        func originUserAgent(_ r: Recorder) -> String? { (json(r)["headers"] as? [String: Any])?["user-agent"] as? String }
        func proxiedUserAgent(_ records: [[String: Any]]) -> String? {
            (records.last?["headers"] as? [String: Any])?["user-agent"] as? String
        }
        var tunnelled = TransferRequest(url: h.httpsURL("/echo"))
        tunnelled.proxy = Self.settings(p, .basic)
        let r1 = try h.fetch(tunnelled)
        #expect(r1.succeeded && originUserAgent(r1) == "engine-ua/1")
        var records = try Self.log(h, p)
        #expect(records.last?["method"] as? String == "CONNECT" && proxiedUserAgent(records) == "engine-ua/1")
        #expect(try h.finish() == [])
        let plain = try Harness(options: options)
        var absolute = TransferRequest(url: plain.url("/echo"))
        absolute.proxy = Self.settings(p, .basic)
        absolute.headers = [("user-agent", "own/2")]
        let r2 = try plain.fetch(absolute)
        #expect(r2.succeeded && originUserAgent(r2) == "own/2")
        records = try Self.log(plain, p)
        #expect(records.last?["method"] as? String == "GET" && proxiedUserAgent(records) == "own/2")
        let direct = try plain.fetch(TransferRequest(url: plain.url("/echo")))
        #expect(originUserAgent(direct) == "engine-ua/1")
        #expect(try plain.finish() == [])
    }

    /// Verification is not switched off by the tunnel: a self-signed origin fails.
    @Test func tunnelledOriginIsStillVerified() throws {
        let p = try Self.proxy(["--auth", "basic"])
        defer { p.stop() }
        let h = try Harness(options: TestCertificates.trustingTestCA,
                            upstreamArguments: TestCertificates.serving("self_signed_cert", "self_signed_key"))
        var req = TransferRequest(url: h.httpsURL("/bytes/10"))
        req.proxy = Self.settings(p, .basic)
        let r = try h.fetch(req)
        #expect(r.failure?.text == "SSL certificate problem: self-signed certificate")
        #expect(try h.finish() == [])
    }

    @Test(arguments: schemes)
    func wrongProxyPassword(auth: AuthScheme, args: [String]) throws {
        let p = try Self.proxy(args)
        defer { p.stop() }
        let h = try Harness(options: TestCertificates.trustingTestCA,
                            upstreamArguments: TestCertificates.serving("good_cert", "good_key"))
        let plain = try Upstream()
        defer { plain.stop() }
        // http: the proxy's 407 is the response.
        var req = TransferRequest(url: plain.url("/echo"))
        req.proxy = Self.settings(p, auth, password: "not-pp")
        let r = try h.fetch(req)
        #expect(r.succeeded)
        #expect(r.head?.status == 407)
        #expect(r.head?.statusText == "Proxy Authentication Required")
        // https: the refused tunnel ends the transfer.
        req.url = h.httpsURL("/echo")
        let s = try h.fetch(req)
        #expect(s.headCount == 0)
        #expect(s.failure?.code == 56)
        #expect(s.failure?.text == "CONNECT tunnel failed, response 407 (Proxy Authentication Required): the proxy refused to open a tunnel to the server")
        #expect(try h.finish() == [])
    }

    @Test func unreachableTunnelTargetIs502() throws {
        let p = try Upstream(script: Upstream.proxyScript)
        defer { p.stop() }
        let h = try Harness()
        var req = TransferRequest(url: "https://127.0.0.1:1/")
        req.proxy = ProxySettings(host: "127.0.0.1", port: p.port)
        let r = try h.fetch(req)
        #expect(r.failure?.code == 56)
        #expect(r.failure?.text == "CONNECT tunnel failed, response 502 (Bad Gateway): the proxy refused to open a tunnel to the server")
        #expect(try h.finish() == [])
    }
}
