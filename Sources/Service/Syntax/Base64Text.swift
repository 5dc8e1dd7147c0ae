import CShims

/// Bytes as base64 text, the way bodies and socket data are handed to clients: what
/// Foundation's `base64EncodedString()` gives (standard alphabet, padded, no line
/// breaks), made by `xh_base64_encode` and copied straight into the reply. Text from
/// clients is read back by `decode`, as strictly as it is written.
enum Base64Text {
    /// The bytes of base64 text, or nil when it is not padded base64 of the standard
    /// alphabet (RFC 4648 §4) with nothing else in it: its length a multiple of 4, `=`
    /// only as the last one or two characters. `eA==` is `x`; `eA`, `eA=` and `eA===`
    /// are refused alike (Foundation's decoder took `eA===`).
    static func decode(_ text: String) -> [UInt8]? {
        var text = text
        return text.withUTF8 { utf8 -> [UInt8]? in
            guard utf8.count > 0 else { return [] }
            var failed = false
            let bytes = [UInt8](unsafeUninitializedCapacity: utf8.count / 4 * 3 + 3) { out, initialized in
                let n = xh_base64_decode(utf8.baseAddress, utf8.count, out.baseAddress)
                failed = n < 0  // SIZE_MAX, as Swift reads a size_t
                initialized = failed ? 0 : n
            }
            return failed ? nil : bytes
        }
    }

    /// The length of the text of `count` bytes.
    static func encodedCount(_ count: Int) -> Int { (count + 2) / 3 * 4 }

    /// The text of `bytes` written into `out`, which is `encodedCount` long.
    private static func encode(_ bytes: UnsafeBufferPointer<UInt8>, into out: UnsafeMutableBufferPointer<UInt8>) {
        guard bytes.count > 0 else { return }
        xh_base64_encode(bytes.baseAddress, bytes.count, out.baseAddress)
    }

    /// The text of `bytes` handed to `emit` in pieces of up to 64 KiB, one after another,
    /// each made in the same small buffer and copied on while it is in the cache (into
    /// a read's `data` or fetch's `body`, `JSONObjectWriter.add(_:unescapedStringOfCount:_:)`):
    /// a long text never exists whole anywhere but in the reply.
    static func encode(_ bytes: UnsafeBufferPointer<UInt8>, inPieces emit: (UnsafeBufferPointer<UInt8>) -> Void) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: encodedCount(min(bytes.count, pieceBytes))) { text in
            var start = 0
            while start < bytes.count {
                let piece = UnsafeBufferPointer(rebasing: bytes[start..<min(start + pieceBytes, bytes.count)])
                let out = UnsafeMutableBufferPointer(rebasing: text[..<encodedCount(piece.count)])
                encode(piece, into: out)
                emit(UnsafeBufferPointer(out))
                start += piece.count
            }
        }
    }

    /// The bytes encoded per piece: a multiple of 3, so that every piece but the last
    /// ends on a whole group and the pieces' texts join into the text of the whole.
    static let pieceBytes = 48 << 10
}
