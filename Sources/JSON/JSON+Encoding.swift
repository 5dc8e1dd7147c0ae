#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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
/// - Integers in decimal; doubles as the shortest text that reads back as the same
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
        if s.utf8.count <= shortStringBytes {
            writeShortString(s, into: &out)
        } else {
            writeLongString(s, into: &out)
        }
        out.append(UInt8(ascii: "\""))
    }

    /// Strings up to this many bytes are scanned by a Swift loop, longer ones by
    /// `strcspn`. glibc's `strcspn` builds a 256-entry table of the bytes to escape on
    /// every call, which costs more than scanning the keys, names and short values that
    /// most of a message is made of; for long text (bodies, an OpenRPC document) it is the
    /// faster, also in a debug build, where a Swift loop is not.
    static let shortStringBytes = 64

    private static func writeShortString(_ s: String, into out: inout [UInt8]) {
        var s = s
        s.withUTF8 { text in
            // A plain index loop: no iterator or closure, which an unoptimised build
            // would call for every byte.
            var run = 0  // start of the bytes not yet copied
            var i = 0
            while i < text.count {
                let byte = text[i]
                if byte < 0x20 || byte == 0x22 || byte == 0x5C {  // a control, `"` or `\`
                    out.append(contentsOf: UnsafeBufferPointer(rebasing: text[run..<i]))
                    writeEscape(byte, into: &out)
                    run = i + 1
                }
                i += 1
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: text[run...]))
        }
    }

    private static func writeLongString(_ s: String, into out: inout [UInt8]) {
        let count = s.utf8.count
        s.withCString { text in
            var i = 0
            while true {
                // libc's strcspn finds the next byte to escape (it stops at NUL, which is
                // one): fast in every build, where a Swift loop is not in a debug build.
                let run = strcspn(text + i, UnsafeRawPointer(escapedBytes.utf8Start).assumingMemoryBound(to: CChar.self))
                text.withMemoryRebound(to: UInt8.self, capacity: count) { out.append(contentsOf: UnsafeBufferPointer(start: $0 + i, count: run)) }
                i += run
                guard i < count else { break }
                writeEscape(UInt8(bitPattern: text[i]), into: &out)
                i += 1
            }
        }
    }

    /// The bytes a string escapes besides NUL: the quote, the backslash and U+0001–U+001F.
    private static let escapedBytes: StaticString = "\"\\\u{01}\u{02}\u{03}\u{04}\u{05}\u{06}\u{07}\u{08}\u{09}\u{0A}\u{0B}\u{0C}\u{0D}\u{0E}\u{0F}\u{10}\u{11}\u{12}\u{13}\u{14}\u{15}\u{16}\u{17}\u{18}\u{19}\u{1A}\u{1B}\u{1C}\u{1D}\u{1E}\u{1F}"

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
