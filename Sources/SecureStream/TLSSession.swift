import COpenSSL
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One TLS connection's OpenSSL state, with no I/O: ciphertext from the peer goes in
/// through `receive` (an input memory BIO), ciphertext for the peer comes out through
/// `takeCiphertext` (an output memory BIO), and plaintext goes through `read` and `write`.
/// `TLSStream` drives it from a socket; the tests drive two of them against each other,
/// feeding records split at every byte.
///
/// OpenSSL keeps errors in a per-thread queue that earlier calls may have left
/// non-empty, and `SSL_get_error` reads it: every call here clears it first, and reads
/// the reason out of it when a call fails, so a message never shows a stale error.
///
/// Memory BIOs grow as needed and never block, so OpenSSL never asks to wait for the
/// output side (`SSL_ERROR_WANT_WRITE`); waiting for input (`SSL_ERROR_WANT_READ`) is
/// `.needsInput`.
final class TLSSession {
    /// What a handshake step or a read came to, when it did not deliver data.
    enum Outcome: Equatable {
        /// OpenSSL needs more ciphertext from the peer.
        case needsInput
        /// The peer sent close_notify: it will send nothing more.
        case closedByPeer
        /// A fatal TLS error, with OpenSSL's reason; the connection is unusable.
        case failed(String)
    }

    private let ssl: OpaquePointer
    /// Ciphertext from the peer, read by OpenSSL. Owned by `ssl`.
    private let input: OpaquePointer
    /// Ciphertext for the peer, written by OpenSSL. Owned by `ssl`.
    private let output: OpaquePointer

    /// A session of the context's role. A client checks the server's certificate:
    /// against the context's CAs unless `verifyPeer` is false, and against `serverName`
    /// (a DNS name, or an IP literal checked against the certificate's IP addresses)
    /// unless `verifyHost` is false. A DNS `serverName` is also sent as SNI, whether or
    /// not it is verified (RFC 6066 sends no literal). A server ignores all three.
    init(context: TLSContext, serverName: String? = nil, verifyPeer: Bool = true,
         verifyHost: Bool = true) throws(TLSError) {
        ERR_clear_error()
        guard let ssl = SSL_new(context.raw) else {
            throw TLSError("cannot make a TLS connection: \(TLSContext.openSSLErrors())")
        }
        guard let input = BIO_new(BIO_s_mem()), let output = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw TLSError("cannot make the TLS memory buffers: \(TLSContext.openSSLErrors())")
        }
        // An empty memory BIO reports "retry" rather than end of file, which is what
        // makes SSL_read say WANT_READ instead of failing when it runs dry.
        _ = BIO_ctrl(input, BIO_C_SET_BUF_MEM_EOF_RETURN, -1, nil)
        _ = BIO_ctrl(output, BIO_C_SET_BUF_MEM_EOF_RETURN, -1, nil)
        SSL_set_bio(ssl, input, output)  // ssl owns both from here; SSL_free frees them.
        self.ssl = ssl
        self.input = input
        self.output = output
        isClient = context.role == .client
        switch context.role {
        case .server:
            SSL_set_accept_state(ssl)
        case .client:
            SSL_set_connect_state(ssl)
            if !verifyPeer { SSL_set_verify(ssl, SSL_VERIFY_NONE, nil) }
            guard let serverName else { break }
            let isLiteral = Self.isIPLiteral(serverName)
            if !isLiteral {
                // SSL_set_tlsext_host_name is an SSL_ctrl macro.
                _ = serverName.withCString {
                    SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, Int(TLSEXT_NAMETYPE_host_name), UnsafeMutableRawPointer(mutating: $0))
                }
            }
            guard verifyPeer, verifyHost else { break }
            let named = isLiteral
                ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), serverName)
                : SSL_set1_host(ssl, serverName)
            guard named == 1 else {
                throw TLSError("cannot verify against the name \(serverName): \(TLSContext.openSSLErrors())")
            }
        }
    }

    private let isClient: Bool

    /// Whether `name` is an IPv4 or IPv6 literal rather than a DNS name.
    static func isIPLiteral(_ name: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, name, &v4) == 1 || inet_pton(AF_INET6, name, &v6) == 1
    }

    deinit { SSL_free(ssl) }

    /// Whether the handshake has finished.
    var handshakeDone: Bool { SSL_is_init_finished(ssl) == 1 }

    /// Hands ciphertext from the peer to OpenSSL. A memory BIO takes everything.
    func receive(_ ciphertext: UnsafeRawBufferPointer) {
        guard let base = ciphertext.baseAddress else { return }
        var offset = 0
        while offset < ciphertext.count {
            let n = BIO_write(input, base + offset, Int32(min(ciphertext.count - offset, Int(Int32.max))))
            // Fails only when memory is exhausted; the bytes are then lost and the
            // connection fails on the next read with a bad record.
            guard n > 0 else { return }
            offset += Int(n)
        }
    }

    /// Advances the handshake with what was received; nil once it is done.
    func handshake() -> Outcome? {
        ERR_clear_error()
        let rc = SSL_do_handshake(ssl)
        if rc == 1 { return nil }
        let result = outcome(rc, "TLS handshake")
        if isClient, case .failed = result, case let verify = SSL_get_verify_result(ssl), verify != X509_V_OK {
            // The queue says only "certificate verify failed"; the result says why.
            return .failed("SSL certificate problem: \(String(cString: X509_verify_cert_error_string(verify)))")
        }
        return result
    }

    /// What `read` delivered.
    enum ReadResult: Equatable {
        /// This many plaintext bytes (more than 0) are at the start of the buffer.
        case data(Int)
        /// No bytes, and why.
        case none(Outcome)
    }

    /// Decrypts into `buffer` what the ciphertext received so far holds.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> ReadResult {
        ERR_clear_error()
        let n = SSL_read(ssl, buffer.baseAddress, Int32(min(buffer.count, Int(Int32.max))))
        if n > 0 { return .data(Int(n)) }
        return .none(outcome(n, "TLS read"))
    }

    /// Encrypts `plaintext`, all of it unless TLS failed; the ciphertext waits for
    /// `takeCiphertext`. Returns the failure's reason, or nil.
    func write(_ plaintext: UnsafeRawBufferPointer) -> String? {
        guard let base = plaintext.baseAddress else { return nil }
        var offset = 0
        while offset < plaintext.count {
            ERR_clear_error()
            // Partial writes are on (TLSContext), so a short count is normal: go on.
            let n = SSL_write(ssl, base + offset, Int32(min(plaintext.count - offset, Int(Int32.max))))
            guard n > 0 else {
                if case .failed(let reason) = outcome(n, "TLS write") { return reason }
                return "TLS write: OpenSSL asked to wait, which a memory buffer never needs"
            }
            offset += Int(n)
        }
        return nil
    }

    /// Queues close_notify for the peer (the first half of a TLS shutdown; this side
    /// does not wait for the peer's). Only meaningful after the handshake.
    func shutdown() {
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
    }

    /// Ciphertext ready for the peer, in order.
    var ciphertextPending: Int { Int(BIO_ctrl_pending(output)) }

    /// Moves up to `buffer.count` bytes of ciphertext for the peer into `buffer`; returns
    /// how many (0 when there is none).
    func takeCiphertext(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard ciphertextPending > 0 else { return 0 }
        let n = BIO_read(output, buffer.baseAddress, Int32(min(buffer.count, Int(Int32.max))))
        return n > 0 ? Int(n) : 0
    }

    /// Whether decrypted bytes or unprocessed ciphertext are waiting (in OpenSSL's record
    /// buffer or in the input BIO), so that a `read` may deliver something without new
    /// input. May say yes for a partial record, which a `read` then reports as
    /// `.needsInput`.
    var hasBufferedInput: Bool { SSL_has_pending(ssl) == 1 || BIO_ctrl_pending(input) > 0 }

    /// The outcome of a failed SSL_do_handshake / SSL_read / SSL_write.
    private func outcome(_ rc: Int32, _ operation: String) -> Outcome {
        switch SSL_get_error(ssl, rc) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            // WANT_WRITE cannot happen with a memory BIO; should it, more input is the
            // only thing that can move the connection on.
            return .needsInput
        case SSL_ERROR_ZERO_RETURN:
            return .closedByPeer
        case SSL_ERROR_SYSCALL:
            return .failed("\(operation): \(TLSContext.openSSLErrors()) (unexpected end of data)")
        default:
            return .failed("\(operation): \(TLSContext.openSSLErrors())")
        }
    }
}
