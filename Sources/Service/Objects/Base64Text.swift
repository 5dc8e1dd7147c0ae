import CShims

/// Bytes as base64 text, the way bodies and socket data are handed to clients: what
/// Foundation's `base64EncodedString()` gives (standard alphabet, padded, no line
/// breaks), written straight into the string's storage by `xh_base64_encode`.
enum Base64Text {
    static func encode(_ bytes: ArraySlice<UInt8>) -> String {
        let length = (bytes.count + 2) / 3 * 4
        guard length > 0 else { return "" }
        return bytes.withUnsafeBufferPointer { input in
            String(unsafeUninitializedCapacity: length) { out in
                xh_base64_encode(input.baseAddress, input.count, out.baseAddress)
            }
        }
    }
}
