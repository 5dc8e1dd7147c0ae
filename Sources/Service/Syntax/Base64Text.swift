import CShims

/// Bytes as base64 text, the way bodies and socket data are handed to clients: what
/// Foundation's `base64EncodedString()` gives (standard alphabet, padded, no line
/// breaks), made by `xh_base64_encode` and copied straight into the reply.
enum Base64Text {
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
