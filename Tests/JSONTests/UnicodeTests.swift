import Testing
import JSON

/// Text in any form: raw UTF-8, BMP and astral escapes, unpaired surrogate escapes (each
/// becomes U+FFFD) and ill-formed UTF-8 (a parse error).
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

    /// yajl 2.1.0 alone gives `?`, a wrong astral character or ill-formed bytes here.
    @Test func unpairedSurrogateEscapesBecomeReplacementCharacters() throws {
        #expect(try JSON.decode(#""\ud800""#) == .string("\u{FFFD}"))
        #expect(try JSON.decode(#""a\ud800bc""#) == .string("a\u{FFFD}bc"))
        #expect(try JSON.decode(#""\udc00""#) == .string("\u{FFFD}"))
        #expect(try JSON.decode(#""\ud800\u0041""#) == .string("\u{FFFD}A"))
        #expect(try JSON.decode(#""\ud800\ud800\udc00""#) == .string("\u{FFFD}\u{10000}"))
        #expect(try JSON.decode(#""\udc00\ud800""#) == .string("\u{FFFD}\u{FFFD}"))
        #expect(try JSON.decode(#""\ud800\n""#) == .string("\u{FFFD}\n"))
    }

    @Test func escapedBackslashBeforeUIsNotAnEscape() throws {
        #expect(try JSON.decode(#""\\ud800""#) == .string("\\ud800"))
        #expect(try JSON.decode(#""\\\ud800""#) == .string("\\\u{FFFD}"))
    }

    @Test func illFormedUTF8IsAParseError() {
        #expect(decodeError([0x22, 0xFF, 0x22]) == JSONParseError(offset: 2, message: invalidUTF8))
        // yajl's own check lets these through; ours catches them at the string's end.
        #expect(decodeError([0x22, 0xC0, 0x80, 0x22]) == JSONParseError(offset: 4, message: invalidUTF8))
        #expect(decodeError([0x22, 0xED, 0xA0, 0x80, 0x22]) == JSONParseError(offset: 5, message: invalidUTF8))
        #expect(decodeError([0x7B, 0x22, 0xC0, 0x80, 0x22, 0x3A, 0x31, 0x7D]) == JSONParseError(offset: 5, message: invalidUTF8))
    }
}
