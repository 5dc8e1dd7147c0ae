import Foundation
import Testing
@testable import HTTPEngine
import TestSupport

/// Client certificates: a server that requires one refuses a client without it, in
/// TLS 1.3 (an alert read after the handshake, libcurl's code 56) as in TLS 1.2 (code
/// 35), and both texts begin with `SSL`; a certificate from the right CA passes; an
/// encrypted key needs its password.
@Suite struct TLSClientCertificateTests {
    static func server(_ mode: String, _ extra: [String] = []) -> [String] {
        TestCertificates.serving("good_cert", "good_key",
                                 ["--client-ca", TestCertificates.path("client_ca"), "--client-cert", mode] + extra)
    }

    static var clientCertificate: ClientCertificate {
        ClientCertificate(certPath: TestCertificates.path("client_cert"), keyPath: TestCertificates.path("client_key"))
    }

    @Test func requiredAndMissingFailsInTLS13() throws {
        let h = try Harness(options: TestCertificates.trustingTestCA, upstreamArguments: Self.server("required"))
        let r = try h.fetch(TransferRequest(url: h.httpsURL("/echo")))
        #expect(r.headCount == 0)
        expectFailure(r, code: 56, prefix: "SSL: OpenSSL SSL_read: OpenSSL/", suffix: ":SSL routines::tlsv13 alert certificate required, errno 0")
        #expect(try h.finish() == [])
    }

    @Test func requiredAndMissingFailsInTLS12() throws {
        let h = try Harness(options: TestCertificates.trustingTestCA,
                            upstreamArguments: Self.server("required", ["--tls-max", "1.2"]))
        let r = try h.fetch(TransferRequest(url: h.httpsURL("/echo")))
        #expect(r.headCount == 0)
        expectFailure(r, code: 35, prefix: "SSL: OpenSSL/", suffix: ":SSL routines::sslv3 alert handshake failure")
        #expect(try h.finish() == [])
    }

    @Test(arguments: ["required", "optional"])
    func certificateFromTheRightCAPasses(mode: String) throws {
        let h = try Harness(options: TestCertificates.trustingTestCA, upstreamArguments: Self.server(mode))
        var req = TransferRequest(url: h.httpsURL("/echo"))
        req.clientCertificate = Self.clientCertificate
        let r = try h.fetch(req)
        #expect(r.succeeded, "\(String(describing: r.failure))")
        #expect(json(r)["clientCertCN"] as? String == "xhrpc-client")
        #expect(try h.finish() == [])
    }

    @Test func optionalAndMissingPasses() throws {
        let h = try Harness(options: TestCertificates.trustingTestCA, upstreamArguments: Self.server("optional"))
        let r = try h.fetch(TransferRequest(url: h.httpsURL("/echo")))
        #expect(r.succeeded, "\(String(describing: r.failure))")
        #expect(json(r)["clientCertCN"] is NSNull)
        #expect(try h.finish() == [])
    }

    @Test func certificateFromAnotherCAFails() throws {
        let h = try Harness(options: TestCertificates.trustingTestCA, upstreamArguments: Self.server("required"))
        var req = TransferRequest(url: h.httpsURL("/echo"))
        req.clientCertificate = ClientCertificate(certPath: TestCertificates.path("rogue_client_cert"),
                                                  keyPath: TestCertificates.path("rogue_client_key"))
        let r = try h.fetch(req)
        expectFailure(r, code: 56, prefix: "SSL: OpenSSL SSL_read: ", suffix: ":SSL routines::tlsv1 alert unknown ca, errno 0")
        #expect(try h.finish() == [])
    }

    @Test func encryptedKeyNeedsItsPassword() throws {
        let h = try Harness(options: TestCertificates.trustingTestCA, upstreamArguments: Self.server("required"))
        let key = TestCertificates.path("client_enc_key")
        var req = TransferRequest(url: h.httpsURL("/echo"))
        req.clientCertificate = ClientCertificate(certPath: TestCertificates.path("client_cert"), keyPath: key,
                                                  keyPassword: TestCertificates.path("client_key_password"))
        let good = try h.fetch(req)
        #expect(good.succeeded, "\(String(describing: good.failure))")
        #expect(json(good)["clientCertCN"] as? String == "xhrpc-client")

        req.clientCertificate?.keyPassword = "not-the-password"
        let bad = try h.fetch(req)
        #expect(bad.failure?.code == 58)
        #expect(bad.failure?.text == "SSL: unable to set private key file: '\(key)' type PEM")
        let badText = bad.failure?.text ?? ""
        #expect(badText.contains("not-the-password") == false)
        #expect(try h.finish() == [])
    }
}
