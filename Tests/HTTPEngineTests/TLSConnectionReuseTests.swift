import Testing
@testable import HTTPEngine
import TestSupport

/// A connection opened with verification switched off is never handed to a request
/// that verifies: libcurl compares the SSL configuration before reusing a connection
/// (and a TLS session), so the verifying request opens its own connection and fails
/// verification there. The relaxed connection stays cached for relaxed requests.
@Suite struct TLSConnectionReuseTests {
    @Test func verifyingRequestDoesNotRideARelaxedConnection() throws {
        let h = try Harness(options: TestCertificates.trustingTestCA,
                            upstreamArguments: TestCertificates.serving("self_signed_cert", "self_signed_key"))
        var relaxed = TransferRequest(url: h.httpsURL("/bytes/10"))
        relaxed.verifyPeer = false
        let first = try h.fetch(relaxed)
        #expect(first.succeeded, "\(String(describing: first.failure))")

        let verifying = try h.fetch(TransferRequest(url: h.httpsURL("/bytes/10")))
        #expect(verifying.headCount == 0)
        #expect(verifying.failure?.text == "SSL certificate problem: self-signed certificate")

        // The relaxed connection was kept: a relaxed request still reuses it, which shows
        // the verifying one had it available and was refused it.
        let (t, third) = try h.start(relaxed)
        h.run(seconds: 30) { third.completions > 0 }
        #expect(third.succeeded)
        #expect(t.metrics?.connectionsOpened == 0)
        #expect(try h.finish() == [])
    }

    /// Host-only relaxation is a different configuration too.
    @Test func hostRelaxedConnectionIsNotReusedByAVerifyingRequest() throws {
        let h = try Harness(options: TestCertificates.trustingTestCA,
                            upstreamArguments: TestCertificates.serving("wrong_host_cert", "wrong_host_key"))
        var relaxed = TransferRequest(url: h.httpsURL("/bytes/10"))
        relaxed.verifyHost = false
        #expect(try h.fetch(relaxed).succeeded)
        let verifying = try h.fetch(TransferRequest(url: h.httpsURL("/bytes/10")))
        #expect(verifying.failure?.text == "SSL: no alternative certificate subject name matches target host name '127.0.0.1'")
        #expect(try h.finish() == [])
    }

    /// After `closeConnections` (the engine's part of `close`, api/openrpc.json) the relaxed connection is dropped
    /// while the next transfer runs; its TLS goodbye must not put a send error into
    /// that transfer's status text in place of its own verification failure.
    @Test func closedRelaxedConnectionLeavesTheNextFailureTextAlone() throws {
        let h = try Harness(options: TestCertificates.trustingTestCA,
                            upstreamArguments: TestCertificates.serving("self_signed_cert", "self_signed_key"))
        var relaxed = TransferRequest(url: h.httpsURL("/bytes/10"))
        relaxed.verifyPeer = false
        let (t1, r1) = try h.start(relaxed)
        h.run(seconds: 30) { r1.completions > 0 }
        #expect(r1.succeeded)
        h.engine.closeConnections(usedBy: t1)
        let r2 = try h.fetch(TransferRequest(url: h.httpsURL("/bytes/10")))
        #expect(r2.failure?.code == 60)
        #expect(r2.failure?.text == "SSL certificate problem: self-signed certificate")
        #expect(try h.finish() == [])
    }
}
