import EventLoop
import Testing
@testable import SecureStream
import TestSupport

/// The client side's checks, as raw sockets use them: the chain and the name are
/// verified by default; each switch relaxes exactly its check; a failed check is told
/// once, through `onHandshake`, in words that say what was wrong with the certificate.
@Suite struct ClientVerificationTests {
    /// Serves `cert` on 127.0.0.1, connects a client to it as `name`, and returns what
    /// the client's `onHandshake` said: nil for success, else the failure's text.
    private func handshake(serving cert: String, as name: String, verifyPeer: Bool = true,
                           verifyHost: Bool = true) throws -> String? {
        let harness = try LoopHarness()
        let server = try TLSContext(certificateFile: TestCertificates.path("\(cert)_cert"),
                                    keyFile: TestCertificates.path("\(cert)_key"))
        let port = try harness.tlsListener(context: server) { tls in
            harness.attempt("server read") { try tls.startReading { _ in } }
        }
        let client = try TLSContext.client(caFile: TestCertificates.path("ca"), tls13Only: false)
        var told: [UVError?] = []
        Stream.connectTCP(loop: harness.loop, host: "127.0.0.1", port: port) { result in
            guard case .success(let stream) = result else { return harness.fail("connect: \(result)") }
            harness.attempt("client TLS") {
                let tls = try TLSStream(wrapping: stream, context: client, serverName: name, verifyPeer: verifyPeer,
                                        verifyHost: verifyHost) { error in
                    told.append(error)
                    harness.finish()
                }
                harness.onFinish { tls.close() }
            }
        }
        try harness.run()
        #expect(told.count == 1, "onHandshake runs exactly once")
        return told.first.flatMap { $0.map(\.operation) }
    }

    @Test func aCertificateOfTheTrustedCAForTheNameIsAccepted() throws {
        #expect(try handshake(serving: "good", as: "localhost") == nil)
    }

    @Test func anIPLiteralIsCheckedAgainstTheCertificatesAddresses() throws {
        #expect(try handshake(serving: "good", as: "127.0.0.1") == nil)
        let refused = try handshake(serving: "wrong_host", as: "127.0.0.1")
        #expect(refused?.hasPrefix("SSL certificate problem: IP address mismatch") == true, "\(refused ?? "accepted")")
    }

    @Test func aSelfSignedCertificateIsRefusedUnlessPeerVerificationIsOff() throws {
        let refused = try handshake(serving: "self_signed", as: "localhost")
        #expect(refused?.hasPrefix("SSL certificate problem: self-signed certificate") == true, "\(refused ?? "accepted")")
        #expect(try handshake(serving: "self_signed", as: "localhost", verifyPeer: false) == nil)
    }

    @Test func anotherHostsCertificateIsRefusedUnlessHostVerificationIsOff() throws {
        let refused = try handshake(serving: "wrong_host", as: "localhost")
        #expect(refused?.hasPrefix("SSL certificate problem: hostname mismatch") == true, "\(refused ?? "accepted")")
        #expect(try handshake(serving: "wrong_host", as: "localhost", verifyHost: false) == nil)
    }

    @Test func hostVerificationOffStillVerifiesTheChain() throws {
        let refused = try handshake(serving: "untrusted", as: "localhost", verifyHost: false)
        #expect(refused?.hasPrefix("SSL certificate problem:") == true, "\(refused ?? "accepted")")
    }
}
