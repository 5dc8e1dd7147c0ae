#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Finds `\u` escapes of UTF-16 surrogates that do not form a pair, so that the decoder
/// refuses them as a parse error where they stand.
///
/// yajl 2.1.0 mishandles them: `"\ud800"` decodes to `?`, a high surrogate followed by a
/// non-surrogate escape (`"\ud800\u0041"`) is combined into a wrong astral character
/// (U+10041), and a lone low surrogate (`"\udc00"`) comes out as the ill-formed bytes
/// `ED B0 80`. None of that crashes, but all of it is silent corruption. JSON's grammar
/// allows such escapes, but RFC 8259 §8.2 leaves their meaning open, and a Swift string
/// cannot hold a lone surrogate: the choice is to refuse or to change the text (U+FFFD).
/// Changed text is not what the client sent, in an id (echoed back different) or in data
/// (`socket.write "\ud800"` put `EF BF BD` on the wire), so the text is refused: the
/// message is a parse error (-32700), as ill-formed UTF-8 is.
///
/// The check marks each unpaired escape for yajl to stop at: its first hex digit is
/// rewritten to `x`, which yajl's lexer refuses right there ("invalid (non-hex)
/// character"), so everything after (dropping the value, resynchronising at the next
/// line, the offsets) is yajl's ordinary error path. The positions are reported too, so
/// that the decoder can say why in its message (`message`) instead of yajl's words about
/// a character the client never sent. The mark is as long as the digit it replaces, so
/// every offset stays what it was.
///
/// The scan is cheap: `memchr` for a backslash, which most messages do not contain at all.
/// Escapes are found exactly, without tracking strings: a backslash escapes the next byte
/// when it ends an odd run of backslashes, and the run starts either after a byte that is
/// not a backslash or at the start of the buffer, which is a clean start because an odd
/// trailing run is held back (below). Backslashes outside strings are invalid JSON, which
/// yajl reports before it reaches any mark.
///
/// An escape, or a high surrogate and the bytes that could be its partner, may be cut by
/// the end of a chunk. Unless the input is final, the scan then asks the caller to hold
/// back the last few bytes (at most 11, from the escape's backslash) and put them in front
/// of the next chunk. They lie inside a string, so holding them back never delays a value.
enum SurrogateEscapeCheck {
    /// The parse error's message for an unpaired surrogate escape, in yajl's style.
    static let message = "lexical error: unpaired UTF-16 surrogate escape (\\uD800-\\uDFFF without its pair) in string."

    /// The outcome for one buffer.
    struct Result {
        /// A copy of the input with every unpaired surrogate escape marked, or nil when
        /// there was none (the common case: no copy is made).
        var marked: [UInt8]?
        /// Where yajl will stop for each mark: the offset of the marked digit (two past
        /// the escape's backslash), in order.
        var stops: [Int] = []
        /// How many bytes at the end to keep for the next chunk (0 when `final`).
        var heldBack = 0
    }

    /// Scans `buffer`; with `final` nothing more follows and nothing is held back.
    static func check(_ buffer: UnsafeRawBufferPointer, final: Bool) -> Result {
        var result = Result()
        guard let base = buffer.baseAddress else { return result }
        let n = buffer.count
        var i = 0
        while i < n, let hit = memchr(base + i, 0x5C, n - i) {
            let start = base.distance(to: UnsafeRawPointer(hit))
            var r = start
            while r < n && buffer[r] == 0x5C { r += 1 }
            if (r - start) % 2 == 0 { i = r; continue }  // only `\\` pairs
            let escape = r - 1  // the backslash that escapes buffer[r]
            if r == n {
                if !final { result.heldBack = n - escape }
                return result
            }
            guard buffer[r] == UInt8(ascii: "u") else { i = r + 1; continue }
            let hex = hex4(buffer, at: r + 1)
            guard case .value(let unit) = hex else {
                if case .incomplete = hex, !final { result.heldBack = n - escape; return result }
                i = r + 1  // not four hex digits: yajl reports the error
                continue
            }
            let next = r + 5
            switch unit {
            case 0xD800...0xDBFF:
                switch lowSurrogateEscape(buffer, at: next) {
                case .value:
                    i = next + 6
                case .incomplete where !final:
                    result.heldBack = n - escape
                    return result
                case .incomplete, .invalid:
                    mark(escape, in: buffer, &result)
                    i = next
                }
            case 0xDC00...0xDFFF:
                mark(escape, in: buffer, &result)  // no high surrogate before it
                i = next
            default:
                i = next
            }
        }
        return result
    }

    /// Marks the escape at `at` (`\uD8xx`, six bytes): its first digit becomes `x`, and
    /// the input is copied on the first mark. The scan goes on reading the original: it
    /// never looks at a marked byte again.
    private static func mark(_ at: Int, in buffer: UnsafeRawBufferPointer, _ result: inout Result) {
        if result.marked == nil { result.marked = Array(buffer) }
        result.marked?[at + 2] = UInt8(ascii: "x")
        result.stops.append(at + 2)
    }

    private enum Scan {
        case value(Int)
        case incomplete  // every byte present matches, but the buffer ends first
        case invalid
    }

    private static func hex4(_ b: UnsafeRawBufferPointer, at j: Int) -> Scan {
        var unit = 0
        for k in j..<(j + 4) {
            guard k < b.count else { return .incomplete }
            guard let digit = hexDigit(b[k]) else { return .invalid }
            unit = unit << 4 | digit
        }
        return .value(unit)
    }

    /// Whether `\uDC00`…`\uDFFF` starts at `j`.
    private static func lowSurrogateEscape(_ b: UnsafeRawBufferPointer, at j: Int) -> Scan {
        for (k, expected) in [UInt8(ascii: "\\"), UInt8(ascii: "u")].enumerated() {
            guard j + k < b.count else { return .incomplete }
            guard b[j + k] == expected else { return .invalid }
        }
        switch hex4(b, at: j + 2) {
        case .value(let unit): return (0xDC00...0xDFFF).contains(unit) ? .value(unit) : .invalid
        case .incomplete:
            // Decide early when the digits present already rule a low surrogate out.
            let present = (j + 2..<min(j + 6, b.count)).map { b[$0] }
            if present.count >= 1, present[0] | 0x20 != UInt8(ascii: "d") { return .invalid }
            if present.count >= 2, !(0xC...0xF).contains(hexDigit(present[1]) ?? -1) { return .invalid }
            return present.allSatisfy { hexDigit($0) != nil } ? .incomplete : .invalid
        case .invalid: return .invalid
        }
    }

    private static func hexDigit(_ c: UInt8) -> Int? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return Int(c) - 48
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return Int(c) - 87
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return Int(c) - 55
        default: return nil
        }
    }
}
