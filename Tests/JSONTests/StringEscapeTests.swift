import Testing
import JSON

/// Escapes decode to the characters they name, and the encoder escapes exactly what RFC
/// 8259 requires.
struct StringEscapeTests {
    @Test func everyEscapeDecodes() throws {
        let text = #""\" \\ \/ \b \f \n \r \t \u0041 \u00e9 \u20AC""#
        #expect(try JSON.decode(text) == .string("\" \\ / \u{08} \u{0C} \n \r \t A é €"))
    }

    @Test func escapedNulIsKept() throws {
        #expect(try JSON.decode(#""a\u0000b""#) == .string("a\u{0}b"))
        #expect(JSON.encodeString("a\u{0}b") == #""a\u0000b""#)
    }

    @Test func encoderEscapesQuoteBackslashAndControls() {
        #expect(JSON.encodeString("\"\\") == #""\"\\""#)
        #expect(JSON.encodeString("\u{08}\u{0C}\n\r\t") == #""\b\f\n\r\t""#)
        #expect(JSON.encodeString("\u{01}\u{1F}") == #""\u0001\u001F""#)
    }

    @Test func encoderLeavesSolidusDelAndNonASCIIAlone() {
        #expect(JSON.encodeString("a/b") == #""a/b""#)
        #expect(JSON.encodeString("\u{7F}") == "\"\u{7F}\"")
        #expect(JSON.encodeString("é€😀") == "\"é€😀\"")
    }

    @Test func keysAreEscapedToo() {
        #expect(JSON.encodeString(["a\"b\n": 1]) == #"{"a\"b\n":1}"#)
    }

    @Test func everyControlCharacterRoundTrips() throws {
        let all = String(String.UnicodeScalarView((0..<0x20).compactMap(Unicode.Scalar.init)))
        let encoded = JSON.encodeString(.string(all))
        #expect(!encoded.utf8.dropFirst().dropLast().contains { $0 < 0x20 })
        #expect(try JSON.decode(encoded) == .string(all))
    }

    /// The encoder copies the runs between escapes whole: an escape is found at every
    /// offset, first and last included, next to non-ASCII text too, in strings shorter
    /// and longer than the C scan's sixteen-byte blocks and eight-byte words
    /// (`xh_json_unescaped_run`; "é" is two bytes).
    @Test func escapesAreFoundAtEveryOffset() {
        let escapes: [(Character, String)] = [("\"", #"\""#), ("\\", #"\\"#), ("\n", #"\n"#), ("\u{1F}", #"\u001F"#),
                                              ("\u{0}", #"\u0000"#)]
        for (raw, escaped) in escapes {
            for length in [1, 7, 8, 9, 16, 17, 23, 42, 43, 63, 64, 65, 100] {
                for at in 0..<length {
                    let filler = at % 2 == 0 ? "x" : "é"
                    var text = "", expected = ""
                    for i in 0..<length {
                        text += i == at ? String(raw) : filler
                        expected += i == at ? escaped : filler
                    }
                    #expect(JSON.encodeString(.string(text)) == "\"" + expected + "\"", "\(escaped) at \(at) of \(length)")
                }
            }
        }
    }

    @Test func rawControlCharacterInStringIsAnError() {
        #expect(decodeError("\"a\tb\"") == JSONParseError(offset: 2, message: "lexical error: invalid character inside string."))
    }

    @Test func badEscapesAreErrors() {
        #expect(decodeError(#""\x""#) != nil)
        #expect(decodeError(#""\u12G4""#) != nil)
    }
}
