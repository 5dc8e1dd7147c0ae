import COpenSSL

/// The two hashing primitives the service needs of OpenSSL besides TLS, so that no
/// layer above this one links against OpenSSL itself.
public enum Digest {
    /// The SHA-256 of `bytes` (32 bytes).
    public static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        bytes.withUnsafeBufferPointer { b in
            digest.withUnsafeMutableBufferPointer { d in _ = SHA256(b.baseAddress, b.count, d.baseAddress) }
        }
        return digest
    }

    /// Whether `a` and `b` are equal, in time that does not depend on where they differ
    /// (only on their length, which is not secret for digests).
    public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBytes { x in b.withUnsafeBytes { y in CRYPTO_memcmp(x.baseAddress, y.baseAddress, x.count) == 0 } }
    }
}

extension Digest {
    /// The SHA-1 of `bytes` (20 bytes). Only for RFC 6455's `Sec-WebSocket-Accept`, which
    /// is defined with it; it protects nothing secret.
    public static func sha1(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(SHA_DIGEST_LENGTH))
        bytes.withUnsafeBufferPointer { b in
            digest.withUnsafeMutableBufferPointer { d in _ = SHA1(b.baseAddress, b.count, d.baseAddress) }
        }
        return digest
    }
}
