import Testing
@testable import HTTPEngine
import TestSupport

/// Public key pinning (`sha256//…`, several joined with `;`): the server's key must
/// match one pin, on top of the usual verification.
@Suite struct TLSPinningTests {
    @Test func matchingPinPasses() throws {
        let h = try Harness(options: TestCertificates.trustingTestCA,
                            upstreamArguments: TestCertificates.serving("good_cert", "good_key"))
        for pins in [TestCertificates.path("good_pin_value"),
                     TestCertificates.path("bad_pin_value") + ";" + TestCertificates.path("good_pin_value")] {
            var req = TransferRequest(url: h.httpsURL("/bytes/10"))
            req.pinnedPublicKey = pins
            let r = try h.fetch(req)
            #expect(r.succeeded, "\(pins): \(String(describing: r.failure))")
        }
        #expect(try h.finish() == [])
    }

    @Test func mismatchingPinFails() throws {
        let h = try Harness(options: TestCertificates.trustingTestCA,
                            upstreamArguments: TestCertificates.serving("good_cert", "good_key"))
        var req = TransferRequest(url: h.httpsURL("/bytes/10"))
        req.pinnedPublicKey = TestCertificates.path("bad_pin_value")
        let r = try h.fetch(req)
        #expect(r.headCount == 0)
        #expect(r.failure?.code == 90)
        #expect(r.failure?.text == "SSL: public key does not match pinned public key")
        #expect(try h.finish() == [])
    }

    /// libcurl does not compare pins when it looks for a connection to reuse, so a
    /// pinned request must not take one an unpinned (or differently pinned) request
    /// left: the engine gives it a fresh connection, without TLS session resumption.
    @Test func pinIsCheckedOnAConnectionOfItsOwn() throws {
        let h = try Harness(options: TestCertificates.trustingTestCA,
                            upstreamArguments: TestCertificates.serving("good_cert", "good_key"))
        #expect(try h.fetch(TransferRequest(url: h.httpsURL("/bytes/10"))).succeeded)
        var pinned = TransferRequest(url: h.httpsURL("/bytes/10"))
        pinned.pinnedPublicKey = TestCertificates.path("bad_pin_value")
        let r = try h.fetch(pinned)
        #expect(r.failure?.text == "SSL: public key does not match pinned public key")
        #expect(try h.finish() == [])
    }
}
