import COpenSSL

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A TLS failure in words an operator can act on: which file, which step, and
/// OpenSSL's own reason.
public struct TLSError: Error, CustomStringConvertible, Sendable {
    public let description: String

    public init(_ description: String) { self.description = description }
}

/// The settings shared by every TLS connection of one role: an `SSL_CTX`, made once (at
/// start-up for the listener) and used for every connection after.
///
/// The server side loads a certificate chain and its key and checks that they match, so a
/// wrong file is a start-up error rather than a failed handshake for every client. Both
/// sides require TLS 1.2 or later, never compress (CRIME), and offer only forward-secret
/// AEAD suites on TLS 1.2 (TLS 1.3 suites are all of that kind). The server refuses
/// renegotiation (a client could otherwise make it do handshake work at will), keeps no
/// session cache (session tickets are stateless, so resumption still works without the
/// server's memory growing with each client), and lets OpenSSL free a connection's
/// buffers while it is idle.
///
/// The client side serves the raw sockets the server opens for its clients (and the
/// tests of this module, which talk to the server side through the same code); it
/// verifies the peer against a CA file and a host name unless a connection says not to.
///
/// Also holds two scratch buffers that every `TLSStream` of the context uses in turn:
/// OpenSSL's output is copied through one into the socket, and decrypted bytes are read
/// into the other for the owner's read callback. Like the streams, a context is confined
/// to one loop's thread, which is what makes sharing them safe (see `TLSStream`).
public final class TLSContext {
    /// Which end of the connections this context makes.
    public enum Role: Sendable {
        case server
        case client
    }

    public let role: Role
    let raw: OpaquePointer

    /// The size of each scratch buffer: four full TLS records.
    static let scratchSize = 64 * 1024
    let plaintextScratch: UnsafeMutableRawPointer
    let ciphertextScratch: UnsafeMutableRawPointer

    /// TLS 1.2 cipher suites: ECDHE key exchange (forward secrecy) with an AEAD cipher,
    /// for ECDSA and RSA certificates alike.
    static let tls12Ciphers = "ECDHE+AESGCM:ECDHE+CHACHA20"

    /// A server context presenting the certificate chain in `certificateFile` (PEM, leaf
    /// first) with the private key in `keyFile` (PEM). Throws a `TLSError` naming the file
    /// at fault when one is missing, unreadable, not PEM, or when the key is not the
    /// certificate's.
    public convenience init(certificateFile: String, keyFile: String) throws(TLSError) {
        try self.init(role: .server)
        try Self.checkReadable(certificateFile, "certificate")
        try Self.checkReadable(keyFile, "key")
        ERR_clear_error()
        guard SSL_CTX_use_certificate_chain_file(raw, certificateFile) == 1 else {
            throw TLSError("the TLS certificate file \(certificateFile) holds no usable PEM certificate: \(Self.openSSLErrors())")
        }
        let mismatch = { TLSError("the TLS key file \(keyFile) does not belong to the certificate in \(certificateFile): \(Self.openSSLErrors())") }
        guard SSL_CTX_use_PrivateKey_file(raw, keyFile, SSL_FILETYPE_PEM) == 1 else {
            // Loading the key already compares it with the certificate.
            if ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH { throw mismatch() }
            throw TLSError("the TLS key file \(keyFile) holds no usable PEM private key (an unencrypted one is needed): \(Self.openSSLErrors())")
        }
        // Checked again in case OpenSSL ever stops comparing on load.
        guard SSL_CTX_check_private_key(raw) == 1 else { throw mismatch() }
    }

    /// A client context that trusts only the CAs in `caFile` (PEM) and verifies the
    /// server's certificate against them; the host name is given per connection.
    public convenience init(trusting caFile: String) throws(TLSError) {
        try self.init(role: .client)
        try Self.checkReadable(caFile, "CA")
        ERR_clear_error()
        guard SSL_CTX_load_verify_locations(raw, caFile, nil) == 1 else {
            throw TLSError("the TLS CA file \(caFile) holds no usable PEM certificate: \(Self.openSSLErrors())")
        }
        SSL_CTX_set_verify(raw, SSL_VERIFY_PEER, nil)
    }

    /// A client context that trusts the system's CAs (OpenSSL's default locations) and
    /// verifies the server's certificate against them.
    public static func trustingSystemCAs() throws(TLSError) -> TLSContext {
        let context = try TLSContext(role: .client)
        ERR_clear_error()
        guard SSL_CTX_set_default_verify_paths(context.raw) == 1 else {
            throw TLSError("cannot load the system's CA certificates: \(Self.openSSLErrors())")
        }
        SSL_CTX_set_verify(context.raw, SSL_VERIFY_PEER, nil)
        return context
    }

    /// A client context for connections the server makes on a client's behalf (raw
    /// sockets): it trusts the CAs in `caFile` (PEM), or the system's when nil, verifies
    /// peers unless a connection says otherwise, and accepts TLS 1.3 only when
    /// `tls13Only`.
    public static func client(caFile: String?, tls13Only: Bool) throws(TLSError) -> TLSContext {
        let context: TLSContext
        if let caFile { context = try TLSContext(trusting: caFile) } else { context = try trustingSystemCAs() }
        if tls13Only {
            guard SSL_CTX_ctrl(context.raw, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_3_VERSION), nil) == 1 else {
                throw TLSError("cannot require TLS 1.3: \(openSSLErrors())")
            }
        }
        return context
    }

    private init(role: Role) throws(TLSError) {
        ERR_clear_error()
        guard let ctx = SSL_CTX_new(role == .server ? TLS_server_method() : TLS_client_method()) else {
            throw TLSError("cannot make a TLS context: \(Self.openSSLErrors())")
        }
        self.role = role
        raw = ctx
        plaintextScratch = .allocate(byteCount: Self.scratchSize, alignment: 16)
        ciphertextScratch = .allocate(byteCount: Self.scratchSize, alignment: 16)
        // The SSL_CTX_set_* macros below are SSL_CTX_ctrl calls, which Swift imports.
        guard SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_2_VERSION), nil) == 1,
              SSL_CTX_set_cipher_list(ctx, Self.tls12Ciphers) == 1
        else {
            throw TLSError("cannot configure the TLS context: \(Self.openSSLErrors())")
        }
        var options = XHRPC_SSL_OP_NO_COMPRESSION
        if role == .server {
            options |= XHRPC_SSL_OP_NO_RENEGOTIATION | XHRPC_SSL_OP_CIPHER_SERVER_PREFERENCE
            _ = SSL_CTX_ctrl(ctx, SSL_CTRL_SET_SESS_CACHE_MODE, Int(SSL_SESS_CACHE_OFF), nil)
        }
        _ = SSL_CTX_set_options(ctx, options)
        // Partial writes: SSL_write may take part of a buffer; TLSStream loops until all
        // is taken, so nothing is lost, and never needs to offer the same pointer again.
        _ = SSL_CTX_ctrl(ctx, SSL_CTRL_MODE,
                         Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS),
                         nil)
    }

    deinit {
        SSL_CTX_free(raw)
        plaintextScratch.deallocate()
        ciphertextScratch.deallocate()
    }

    /// Fails with the system's reason when `path` cannot be opened for reading, so the
    /// message says "No such file or directory" rather than OpenSSL's "system lib".
    private static func checkReadable(_ path: String, _ what: String) throws(TLSError) {
        guard let file = fopen(path, "r") else {
            let reason = String(cString: strerror(errno))
            throw TLSError("cannot read the TLS \(what) file \(path): \(reason)")
        }
        fclose(file)
    }

    /// OpenSSL's queued errors of this thread, oldest first, as one line, and clears
    /// the queue. "no details" when it is empty.
    static func openSSLErrors() -> String {
        var texts: [String] = []
        let size = 256
        let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: size)
        defer { buffer.deallocate() }
        while case let code = ERR_get_error(), code != 0 {
            if texts.count < 4 {
                ERR_error_string_n(code, buffer, size)
                texts.append(String(cString: buffer))
            }
        }
        return texts.isEmpty ? "no details" : texts.joined(separator: "; ")
    }
}
