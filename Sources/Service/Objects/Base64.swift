/// Base64 (RFC 4648 §4, padded, no line breaks): exactly the text Foundation's
/// `base64EncodedString()` gives, written in one pass straight into the string's own
/// storage. Every body byte a client reads as base64 (`getReceiveBuffer`, `socket.read`,
/// fetch's `responseType: base64`) goes through here; Foundation's encoder went through
/// a `Data` copy and cost about three times as many instructions per byte.
enum Base64 {
    private static let alphabet: StaticString = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

    static func encode(_ bytes: ArraySlice<UInt8>) -> String {
        bytes.withUnsafeBufferPointer(encode)
    }

    static func encode(_ bytes: [UInt8]) -> String {
        bytes.withUnsafeBufferPointer(encode)
    }

    /// The two symbols of each 12-bit value, as they lie in memory: three bytes are two
    /// such values, so a group takes two lookups and two stores.
    private static let symbolPairs: [UInt16] = {
        let symbol = alphabet.utf8Start
        return (0..<4096).map { v in
            var pair: UInt16 = 0
            withUnsafeMutableBytes(of: &pair) {
                $0[0] = symbol[v >> 6]
                $0[1] = symbol[v & 0x3F]
            }
            return pair
        }
    }()

    static func encode(_ input: UnsafeBufferPointer<UInt8>) -> String {
        let length = (input.count + 2) / 3 * 4
        guard length > 0 else { return "" }
        return symbolPairs.withUnsafeBufferPointer { pairs in
            String(unsafeUninitializedCapacity: length) { out in
                let symbol = alphabet.utf8Start
                let target = UnsafeMutableRawPointer(out.baseAddress!)
                let whole = input.count - input.count % 3
                var i = 0, o = 0
                while i < whole {
                    let group = Int(input[i]) << 16 | Int(input[i + 1]) << 8 | Int(input[i + 2])
                    target.storeBytes(of: pairs[group >> 12], toByteOffset: o, as: UInt16.self)
                    target.storeBytes(of: pairs[group & 0xFFF], toByteOffset: o + 2, as: UInt16.self)
                    i += 3
                    o += 4
                }
                // One or two bytes left: two or three symbols, then "=" padding.
                if i < input.count {
                    let second = i + 1 < input.count ? Int(input[i + 1]) : 0
                    let group = Int(input[i]) << 16 | second << 8
                    out[o] = symbol[group >> 18]
                    out[o + 1] = symbol[group >> 12 & 0x3F]
                    out[o + 2] = i + 1 < input.count ? symbol[group >> 6 & 0x3F] : UInt8(ascii: "=")
                    out[o + 3] = UInt8(ascii: "=")
                }
                return length
            }
        }
    }
}
