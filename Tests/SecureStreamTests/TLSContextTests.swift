import Testing
@testable import SecureStream
import TestSupport

/// Loading failures name the file at fault and say what is wrong with it.
@Test func contextLoadingFailuresNameTheFile() throws {
    let cert = TestCertificates.path("good_cert")
    let key = TestCertificates.path("good_key")
    func message(_ cert: String, _ key: String) -> String {
        do {
            _ = try TLSContext(certificateFile: cert, keyFile: key)
            return "no error"
        } catch {
            return error.description
        }
    }
    #expect(message(cert, key) == "no error")
    #expect(message("/nonexistent/cert.pem", key)
        == "cannot read the TLS certificate file /nonexistent/cert.pem: No such file or directory")
    #expect(message(cert, "/nonexistent/key.pem")
        == "cannot read the TLS key file /nonexistent/key.pem: No such file or directory")
    // A key where the certificate should be, and the other way round.
    #expect(message(key, key).hasPrefix("the TLS certificate file \(key) holds no usable PEM certificate: error:"))
    #expect(message(cert, cert).hasPrefix("the TLS key file \(cert) holds no usable PEM private key"))
    // A key of another certificate.
    let other = TestCertificates.path("untrusted_key")
    #expect(message(cert, other).hasPrefix("the TLS key file \(other) does not belong to the certificate in \(cert): error:"),
            "\(message(cert, other))")
}
