import CShims

extension JSON {
    /// Encodes a value as compact JSON with no trailing newline (the writer adds the
    /// message separator itself).
    public static func encode(_ value: JSONValue) -> [UInt8] {
        var bytes: [UInt8] = []
        encode(value, into: &bytes)
        return bytes
    }

    /// Appends the compact JSON text of a value to `buffer`. This is the server's write
    /// path, called for every message, so it writes straight into the caller's buffer
    /// (a connection's output buffer) rather than returning a new array.
    public static func encode(_ value: JSONValue, into buffer: inout [UInt8]) {
        JSONWriter.write(value, into: &buffer)
    }

    /// The compact JSON text of a value as a string, for logs and tests.
    public static func encodeString(_ value: JSONValue) -> String {
        String(decoding: encode(value), as: UTF8.self)
    }
}

/// Compact JSON text, byte for byte what yajl's generator wrote before it (configured
/// with no beautifying, no UTF-8 check and no solidus escape), appended in place:
/// - Strings: `\"`, `\\`, the short escapes `\b \f \n \r \t`, and `\u00XX` (upper-case
///   hex) for the other control characters; `/`, DEL and non-ASCII text are written as
///   they are (Swift strings are valid UTF-8 already). The runs between escapes are
///   copied whole.
/// - Integers in decimal (a `.bigInteger` as its digits); doubles as the shortest text that reads back as the same
///   double (Swift's `description`: 0.1, 1e+16); NaN and the infinities are not JSON
///   and are written `null`.
/// - No depth limit: the decoder bounds what comes in at 512 levels, and values the
///   server builds are shallow.
enum JSONWriter {
    static func write(_ value: JSONValue, into out: inout [UInt8]) {
        switch value {
        case .null:
            append("null", to: &out)
        case .bool(let b):
            append(b ? "true" : "false", to: &out)
        case .int(let i):
            writeInteger(i, into: &out)
        case .bigInteger(let digits):
            var digits = digits
            digits.withUTF8 { out.append(contentsOf: $0) }
        case .double(let d):
            guard d.isFinite else { return append("null", to: &out) }
            var text = d.description
            text.withUTF8 { out.append(contentsOf: $0) }
        case .string(let s):
            writeString(s, into: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (i, element) in elements.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                write(element, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            for (i, member) in object.members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                writeString(member.key, into: &out)
                out.append(UInt8(ascii: ":"))
                write(member.value, into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static func append(_ literal: StaticString, to out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// Decimal digits, without going through a `String`.
    static func writeInteger(_ value: Int64, into out: inout [UInt8]) {
        if value < 0 { out.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        // 20 digits hold UInt64.max.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var start = 20
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            out.append(contentsOf: UnsafeBufferPointer(rebasing: digits[start..<20]))
        }
    }

    static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { writeEscaped($0, into: &out) }
        out.append(UInt8(ascii: "\""))
    }

    /// The inside of a JSON string (no quotes) whose text is the valid UTF-8 `bytes`.
    static func writeEscaped(_ bytes: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) {
        guard let base = bytes.baseAddress else { return }
        var i = 0
        while i < bytes.count {
            let run = xh_json_unescaped_run(base + i, bytes.count - i)
            out.append(contentsOf: UnsafeBufferPointer(start: base + i, count: run))
            i += run
            guard i < bytes.count else { break }
            writeEscape(base[i], into: &out)
            i += 1
        }
    }

    private static func writeEscape(_ byte: UInt8, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\\"))
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.append(byte)
        case 0x08: out.append(UInt8(ascii: "b"))
        case 0x0C: out.append(UInt8(ascii: "f"))
        case 0x0A: out.append(UInt8(ascii: "n"))
        case 0x0D: out.append(UInt8(ascii: "r"))
        case 0x09: out.append(UInt8(ascii: "t"))
        default:
            let hex: StaticString = "0123456789ABCDEF"
            let digits = hex.utf8Start
            out.append(UInt8(ascii: "u"))
            out.append(UInt8(ascii: "0"))
            out.append(UInt8(ascii: "0"))
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
    }
}
