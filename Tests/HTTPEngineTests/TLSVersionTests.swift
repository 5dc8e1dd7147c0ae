import Testing
@testable import HTTPEngine
import TestSupport

/// The engine's minimum TLS version (`--tls-min`): 1.2 by default, so a TLS 1.2 server
/// is reached; with 1.3 the same server is refused with an `SSL` status text.
@Suite struct TLSVersionTests {
    static let tls12Server = TestCertificates.serving("good_cert", "good_key", ["--tls-max", "1.2"])

    @Test func defaultMinimumReachesATLS12Server() throws {
        let h = try Harness(options: TestCertificates.trustingTestCA, upstreamArguments: Self.tls12Server)
        let r = try h.fetch(TransferRequest(url: h.httpsURL("/echo")))
        #expect(r.succeeded, "\(String(describing: r.failure))")
        #expect((json(r)["tls"] as? [String: Any])?["version"] as? String == "TLSv1.2")
        #expect(try h.finish() == [])
    }

    @Test func minimum13RefusesATLS12Server() throws {
        var options = TestCertificates.trustingTestCA
        options.tlsMin = .v1_3
        let h = try Harness(options: options, upstreamArguments: Self.tls12Server)
        let r = try h.fetch(TransferRequest(url: h.httpsURL("/echo")))
        #expect(r.headCount == 0)
        expectFailure(r, code: 35, prefix: "SSL: OpenSSL/", suffix: ":SSL routines::tlsv1 alert protocol version")
        #expect(try h.finish() == [])
    }
}
