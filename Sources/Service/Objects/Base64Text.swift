import CShims

/// Bytes as base64 text, the way bodies and socket data are handed to clients: what
/// Foundation's `base64EncodedString()` gives (standard alphabet, padded, no line
/// breaks), written straight into the string's storage by `xh_base64_encode`.
enum Base64Text {
    static func encode(_ bytes: ArraySlice<UInt8>) -> String {
        let length = encodedCount(bytes.count)
        guard length > 0 else { return "" }
        return bytes.withUnsafeBufferPointer { input in
            String(unsafeUninitializedCapacity: length) { out in
                encode(input, into: out)
                return length
            }
        }
    }

    /// The length of the text of `count` bytes.
    static func encodedCount(_ count: Int) -> Int { (count + 2) / 3 * 4 }

    /// The text of `bytes` written into `out`, which is `encodedCount` long.
    static func encode(_ bytes: UnsafeBufferPointer<UInt8>, into out: UnsafeMutableBufferPointer<UInt8>) {
        guard bytes.count > 0 else { return }
        xh_base64_encode(bytes.baseAddress, bytes.count, out.baseAddress)
    }
}
