import EventLoop
@testable import SecureStream
import TestSupport

/// The TLS contexts the tests build from the test certificates.
extension TestCertificates {
    /// The server context of the tests: the CA-signed certificate for localhost.
    static func serverContext() throws -> TLSContext {
        try TLSContext(certificateFile: path("good_cert"), keyFile: path("good_key"))
    }

    /// A client context trusting the test CA.
    static func clientContext(trusting ca: String = "ca") throws -> TLSContext {
        try TLSContext(trusting: path(ca))
    }
}

/// TLS on the harness's loop: a listener and a client whose streams it tracks.
extension LoopHarness {
    /// Listens on 127.0.0.1 (ephemeral port) and wraps each accepted connection in a
    /// server TLS stream handed to `accepted`; returns the port.
    func tlsListener(context: TLSContext, handshakeTimeout: UInt64 = TLSStream.defaultHandshakeTimeout,
                     _ accepted: @escaping (TLSStream) -> Void) throws -> Int {
        let listener = try Listener.tcp(loop: loop, host: "127.0.0.1", port: 0)
        track(listener)
        try listener.listen { [unowned self] result in
            guard case .success(let stream) = result else {
                return fail("accept failed: \(result)")
            }
            attempt("wrapping in TLS") {
                do {
                    let tls = try TLSStream(wrapping: stream, context: context, handshakeTimeout: handshakeTimeout)
                    onFinish { tls.close() }
                    accepted(tls)
                } catch {
                    stream.close()
                    throw error
                }
            }
        }
        return listener.boundPort ?? 0
    }

    /// Connects a TLS client to 127.0.0.1:`port`, verifying the name "localhost".
    func tlsClient(port: Int, context: TLSContext, _ connected: @escaping (TLSStream) -> Void) {
        Stream.connectTCP(loop: loop, host: "127.0.0.1", port: port) { [unowned self] result in
            guard case .success(let stream) = result else {
                return fail("connect failed: \(result)")
            }
            attempt("client TLS") {
                do {
                    let tls = try TLSStream(wrapping: stream, context: context, serverName: "localhost")
                    onFinish { tls.close() }
                    connected(tls)
                } catch {
                    stream.close()
                    throw error
                }
            }
        }
    }
}
