/// Header names compare case-insensitively (RFC 9110 §5.1). This is the one place that
/// says how: exactly as `a.lowercased() == b.lowercased()`, without building two
/// strings for the ASCII names that nearly every header has. Called for every header of
/// every response, several times.
public enum HeaderName {
    public static func equal(_ a: String, _ b: String) -> Bool {
        var a = a, b = b
        let verdict = a.withUTF8 { x in b.withUTF8 { y in compareBytes(x, y) } }
        return verdict ?? (a.lowercased() == b.lowercased())
    }

    /// The same for names as bytes (a header field's as it came, `HeaderFields`): equal
    /// exactly when the texts `decodeHeaderText` reads from them are.
    public static func equal(_ x: UnsafeBufferPointer<UInt8>, _ y: UnsafeBufferPointer<UInt8>) -> Bool {
        compareBytes(x, y)
            ?? (decodeHeaderText(UnsafeRawBufferPointer(x)).lowercased() == decodeHeaderText(UnsafeRawBufferPointer(y)).lowercased())
    }

    /// Whether the names are equal when the bytes decide it; nil when non-ASCII text
    /// has to be lower-cased to tell.
    private static func compareBytes(_ x: UnsafeBufferPointer<UInt8>, _ y: UnsafeBufferPointer<UInt8>) -> Bool? {
        if x.count == y.count {
            var i = 0
            while i < x.count, x[i] == y[i] || lower(x[i]) == lower(y[i]) { i += 1 }
            // Equal but for ASCII case: equal when lower-cased, whatever else they hold.
            if i == x.count { return true }
        }
        // Otherwise only non-ASCII letters can still lower-case alike (even at another length).
        return isASCII(x) && isASCII(y) ? false : nil
    }

    private static func lower(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
    }
}
