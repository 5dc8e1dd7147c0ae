import Testing
import JSON

/// Text in any form: raw UTF-8, BMP and astral escapes, and the two kinds of text a Swift
/// string cannot hold as sent, each a parse error: unpaired surrogate escapes and
/// ill-formed UTF-8.
struct UnicodeTests {
    @Test func rawUTF8() throws {
        let text = "\"héllo — 日本語 😀 𝄞\""
        #expect(try JSON.decode(text) == .string("héllo — 日本語 😀 𝄞"))
        #expect(JSON.encodeString("héllo — 日本語 😀 𝄞") == text)
    }

    @Test func bmpEscapes() throws {
        #expect(try JSON.decode(#""\u00e9\u65e5\uFFFF""#) == .string("é日\u{FFFF}"))
    }

    @Test func astralViaSurrogatePairEscapes() throws {
        #expect(try JSON.decode(#""\ud83d\ude00""#) == .string("😀"))
        #expect(try JSON.decode(#""\uD834\uDD1E""#) == .string("𝄞"))
        #expect(try JSON.decode(#""\udbff\udfff""#) == .string("\u{10FFFF}"))
    }

    /// yajl 2.1.0 alone gives `?`, a wrong astral character or ill-formed bytes here; the
    /// decoder once gave U+FFFD, text the client never sent (issue 41). The error stands
    /// at the escape's first hex digit, the first unpaired one when there are several.
    @Test func unpairedSurrogateEscapesAreParseErrors() {
        let cases: [(String, Int)] = [
            (#""\ud800""#, 3), (#""a\ud800bc""#, 4), (#""\udc00""#, 3), (#""\ud800\u0041""#, 3),
            (#""\ud800\ud800\udc00""#, 3), (#""\ud83d\ude00\udc00\ud800""#, 15), (#""\udc00\ud800""#, 3),
            (#""\ud800\n""#, 3), (#""\uDBFF""#, 3), (#""\uDFFF""#, 3), (#"["x", {"id": "\ud800"}]"#, 16),
            (#"{"\ud800": 1}"#, 4),
        ]
        for (text, offset) in cases {
            #expect(decodeError(text) == JSONParseError(offset: offset, message: unpairedSurrogate), "\(text)")
        }
    }

    /// The same for a stream, cut at every byte: one error, the value dropped, the next
    /// line read as usual.
    @Test func unpairedSurrogateEscapesInAStreamCutAnywhere() {
        let input = utf8(#"{"id":"\ud800","x":1}"# + "\n" + #"["ok"]"# + "\n")
        for chunks in everySplit(input) {
            #expect(events(chunks) == [parseError(9, unpairedSurrogate), .value(["ok"])], "split \(chunks.map(\.count))")
        }
    }

    @Test func escapedBackslashBeforeUIsNotAnEscape() throws {
        #expect(try JSON.decode(#""\\ud800""#) == .string("\\ud800"))
        #expect(decodeError(#""\\\ud800""#) == JSONParseError(offset: 5, message: unpairedSurrogate))
    }

    @Test func illFormedUTF8IsAParseError() {
        #expect(decodeError([0x22, 0xFF, 0x22]) == JSONParseError(offset: 2, message: invalidUTF8))
        // yajl's own check lets these through; ours catches them at the string's end.
        #expect(decodeError([0x22, 0xC0, 0x80, 0x22]) == JSONParseError(offset: 4, message: invalidUTF8))
        #expect(decodeError([0x22, 0xED, 0xA0, 0x80, 0x22]) == JSONParseError(offset: 5, message: invalidUTF8))
        #expect(decodeError([0x7B, 0x22, 0xC0, 0x80, 0x22, 0x3A, 0x31, 0x7D]) == JSONParseError(offset: 5, message: invalidUTF8))
    }
}
