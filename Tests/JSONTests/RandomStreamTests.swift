import Testing
import JSON
import SeededRandom

/// Random values, written with random whitespace between them and (in one variant) with
/// every non-ASCII character as `\u` escapes; unpaired surrogate escapes are refused, at
/// the same offset, however the stream is cut. The generator is seeded, so a failure
/// repeats.
struct RandomStreamTests {
    static let scalars: [Unicode.Scalar] = ["a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\u{0}", "\u{1F}",
                                            "\u{7F}", "é", "ß", "€", "日", "\u{FFFD}", "\u{FFFF}", "😀", "𝄞", "\u{10FFFF}"]

    static func string(_ r: inout SplitMix64) -> String {
        var s = String.UnicodeScalarView()
        for _ in 0..<r.below(8) { s.append(scalars[r.below(scalars.count)]) }
        return String(s)
    }

    static func value(_ r: inout SplitMix64, depth: Int = 0) -> JSONValue {
        switch r.below(depth >= 3 ? 6 : 8) {
        case 0: return .null
        case 1: return .bool(r.below(2) == 0)
        case 2: return .int([0, 1, -1, Int64.max, Int64.min, Int64(bitPattern: r.next())][r.below(6)])
        case 3: return .double([0.1, -2.5e-300, 1e300, 123.456, Double(bitPattern: r.next() >> 2)][r.below(5)])
        case 4, 5: return .string(string(&r))
        case 6: return .array((0..<r.below(4)).map { _ in value(&r, depth: depth + 1) })
        default:
            var members: [(String, JSONValue)] = []
            for i in 0..<r.below(4) { members.append(("\(string(&r))#\(i)", value(&r, depth: depth + 1))) }
            return .object(JSONObject(members))
        }
    }

    /// JSON text with every non-ASCII scalar as `\u` escapes (surrogate pairs above the
    /// BMP); the decoder must give back the same value.
    static func asciiText(_ v: JSONValue) -> String {
        switch v {
        case .string(let s):
            var out = "\""
            for scalar in s.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case _ where scalar.value < 0x20 || scalar.value > 0x7E:
                    for unit in String(scalar).utf16 { out += "\\u" + hex4(unit) }
                default: out.unicodeScalars.append(scalar)
                }
            }
            return out + "\""
        case .array(let a): return "[" + a.map(asciiText).joined(separator: ",") + "]"
        case .object(let o):
            return "{" + o.members.map { asciiText(.string($0.key)) + ":" + asciiText($0.value) }.joined(separator: ",") + "}"
        default: return JSON.encodeString(v)
        }
    }

    static func hex4(_ unit: UInt16) -> String {
        let digits = String(unit, radix: 16)
        return String(repeating: "0", count: 4 - digits.count) + digits
    }

    static func randomChunks(_ bytes: [UInt8], _ r: inout SplitMix64) -> [[UInt8]] {
        var chunks: [[UInt8]] = []
        var at = 0
        while at < bytes.count {
            let end = min(bytes.count, at + 1 + r.below(r.below(4) == 0 ? 3 : 40))
            chunks.append(Array(bytes[at..<end]))
            at = end
        }
        return chunks
    }

    static let separators = [" ", "\n", "\r\n", "\t", "  \n "]

    @Test(arguments: [false, true])
    func randomStreams(escaped: Bool) {
        var r = SplitMix64(seed: escaped ? 2 : 1)
        for _ in 0..<200 {
            var values: [JSONValue] = []
            var text = ""
            for _ in 0..<(1 + r.below(6)) {
                let v = Self.value(&r)
                values.append(v)
                text += (escaped ? Self.asciiText(v) : JSON.encodeString(v)) + Self.separators[r.below(Self.separators.count)]
            }
            let bytes = utf8(text)
            let expected = values.map(JSONStreamEvent.value)
            #expect(events([bytes]) == expected)
            #expect(events(Self.randomChunks(bytes, &r)) == expected, "\(text)")
        }
    }

    /// What a string literal's ASCII body means: escapes give UTF-16 code units, and a
    /// surrogate not in a pair makes it a parse error at its escape's first hex digit
    /// (the offset in `body`; the first such escape). An independent statement of the
    /// rule the decoder follows.
    static func reference(_ body: String) -> Result<String, ReferenceError> {
        var units: [(unit: UInt16, digit: Int)] = []
        let chars = Array(body.utf16)
        var i = 0
        while i < chars.count {
            let c = chars[i]
            guard c == 0x5C, i + 1 < chars.count else {
                units.append((c, -1))
                i += 1
                continue
            }
            switch chars[i + 1] {
            case 0x75:  // u
                let hex = String(decoding: chars[(i + 2)..<(i + 6)], as: UTF16.self)
                units.append((UInt16(hex, radix: 16) ?? 0, i + 2))
                i += 6
            case 0x6E:  // n
                units.append((0x0A, -1))
                i += 2
            default:  // \\ and \"
                units.append((chars[i + 1], -1))
                i += 2
            }
        }
        var k = 0
        while k < units.count {
            switch units[k].unit {
            case 0xD800...0xDBFF where k + 1 < units.count && (0xDC00...0xDFFF).contains(units[k + 1].unit):
                k += 2
            case 0xD800...0xDFFF:
                return .failure(ReferenceError(digit: units[k].digit))
            default:
                k += 1
            }
        }
        return .success(String(decoding: units.map(\.unit), as: UTF16.self))
    }

    struct ReferenceError: Error, Equatable { let digit: Int }

    @Test func unpairedSurrogatesAtRandomCuts() {
        var r = SplitMix64(seed: 3)
        let pieces = ["\\ud800", "\\udfff", "\\uDBFF", "\\udc00", "\\ud83d\\ude00", "\\\\ud800", "\\u0041", "x", "\\n", "\\\\"]
        var refused = 0
        for _ in 0..<500 {
            var body = ""
            for _ in 0..<(1 + r.below(6)) { body += pieces[r.below(pieces.count)] }
            let text = "\"" + body + "\"\n" + "7\n"
            let expected: [JSONStreamEvent]
            switch Self.reference(body) {
            case .success(let string): expected = [.value(.string(string)), .value(7)]
            case .failure(let e):
                expected = [parseError(1 + e.digit, unpairedSurrogate), .value(7)]
                refused += 1
            }
            #expect(events(Self.randomChunks(utf8(text), &r)) == expected, "\(text)")
        }
        #expect(refused > 100 && refused < 400)
    }

    @Test func referenceAgreesWithKnownCases() {
        #expect(Self.reference(#"\ud800\udfff"#) == .success("\u{103FF}"))
        #expect(Self.reference(#"x\ud800x"#) == .failure(ReferenceError(digit: 3)))
        #expect(Self.reference(#"\ud83d\ude00\udc00"#) == .failure(ReferenceError(digit: 14)))
        #expect(Self.reference(#"\\ud800"#) == .success("\\ud800"))
    }
}
