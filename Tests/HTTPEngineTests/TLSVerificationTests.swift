import Testing
@testable import HTTPEngine
import TestSupport

/// Certificate verification is on by default and fails each bad certificate with the
/// status text a person can act on; the two switches (`disablePeerVerification`,
/// `disableHostVerification`, api/openrpc.json) relax it exactly as far as they say. The upstream serves certificates made at test time
/// (`TestCertificates`); the engine trusts only the test CA unless the case says so.
@Suite struct TLSVerificationTests {
    /// (certificate served, engine trusts the test CA, libcurl code, exact status text).
    static let failures: [(String, Bool, Int32, String)] = [
        ("wrong_host", true, 60, "SSL: no alternative certificate subject name matches target host name '127.0.0.1'"),
        ("expired", true, 60, "SSL certificate problem: certificate has expired"),
        ("not_yet_valid", true, 60, "SSL certificate problem: certificate is not yet valid"),
        ("self_signed", true, 60, "SSL certificate problem: self-signed certificate"),
        ("untrusted", true, 60, "SSL certificate problem: unable to get local issuer certificate"),
        // The good certificate, checked against the system bundle instead of the test CA.
        ("good", false, 60, "SSL certificate problem: unable to get local issuer certificate"),
    ]

    @Test(arguments: failures)
    func badCertificateFailsWithItsReason(cert: String, trustTestCA: Bool, code: Int32, text: String) throws {
        let h = try Harness(options: trustTestCA ? TestCertificates.trustingTestCA : EngineOptions(),
                            upstreamArguments: TestCertificates.serving(cert + "_cert", cert + "_key"))
        let r = try h.fetch(TransferRequest(url: h.httpsURL("/bytes/10")))
        #expect(r.completions == 1)
        #expect(r.headCount == 0)
        #expect(r.failure?.code == code)
        #expect(r.failure?.text == text)
        #expect(try h.finish() == [])
    }

    @Test func goodCertificateFromTheConfiguredCAPasses() throws {
        let h = try Harness(options: TestCertificates.trustingTestCA,
                            upstreamArguments: TestCertificates.serving("good_cert", "good_key"))
        let r = try h.fetch(TransferRequest(url: h.httpsURL("/echo")))
        #expect(r.succeeded, "\(String(describing: r.failure))")
        #expect(r.head?.status == 200)
        #expect((json(r)["tls"] as? [String: Any])?["version"] as? String == "TLSv1.3")
        #expect(try h.finish() == [])
    }

    /// `disableHostVerification` accepts a certificate for another name, but still
    /// wants a trusted one.
    @Test func hostSwitchRelaxesOnlyTheName() throws {
        for (cert, passes) in [("wrong_host", true), ("self_signed", false)] {
            let h = try Harness(options: TestCertificates.trustingTestCA,
                                upstreamArguments: TestCertificates.serving(cert + "_cert", cert + "_key"))
            var req = TransferRequest(url: h.httpsURL("/bytes/10"))
            req.verifyHost = false
            let r = try h.fetch(req)
            if passes {
                #expect(r.succeeded, "\(cert): \(String(describing: r.failure))")
                #expect(r.head?.status == 200)
            } else {
                #expect(r.failure?.text == "SSL certificate problem: self-signed certificate")
            }
            #expect(try h.finish() == [])
        }
    }

    /// `disablePeerVerification` accepts any certificate, host name included (it
    /// implies `disableHostVerification`, as api/openrpc.json says).
    @Test(arguments: ["wrong_host", "expired", "not_yet_valid", "self_signed", "untrusted"])
    func peerSwitchAcceptsAnyCertificate(cert: String) throws {
        let h = try Harness(options: TestCertificates.trustingTestCA,
                            upstreamArguments: TestCertificates.serving(cert + "_cert", cert + "_key"))
        var req = TransferRequest(url: h.httpsURL("/bytes/10"))
        req.verifyPeer = false
        let r = try h.fetch(req, Recorder(expectingSeed: 0))
        #expect(r.succeeded, "\(String(describing: r.failure))")
        #expect(r.checker?.matches(count: 10) == true)
        #expect(try h.finish() == [])
    }

    /// A redirect from http to https is held to the same checks.
    @Test func redirectToHTTPSIsVerified() throws {
        let tls = try Upstream(arguments: TestCertificates.serving("self_signed_cert", "self_signed_key"))
        defer { tls.stop() }
        let h = try Harness(options: TestCertificates.trustingTestCA)
        let r = try h.fetch(TransferRequest(url: h.url("/redirect-to?url=\(tls.httpsURL("/bytes/10"))")))
        #expect(r.failure?.text == "SSL certificate problem: self-signed certificate")
        #expect(try h.finish() == [])
    }
}
