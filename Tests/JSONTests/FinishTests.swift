import Testing
import JSON

/// `finish()` ends the stream: a pending bare number is emitted, an open value is an error.
struct FinishTests {
    @Test func trailingBareNumberIsEmittedAtFinish() {
        let decoder = JSONStreamDecoder()
        #expect(decoder.feed(utf8("[1] 42")) == [.value([1])])
        #expect(decoder.finish() == [.value(42)])
    }

    @Test func unterminatedObjectIsAnError() {
        let decoder = JSONStreamDecoder()
        #expect(decoder.feed(utf8("{\"a\":1")) == [])
        #expect(decoder.finish() == [parseError(6, prematureEOF)])
    }

    /// yajl itself forgets this case once a value has been read before it.
    @Test func unterminatedStringAfterAnotherValueIsAnError() {
        #expect(events([utf8("1 \"abc")]) == [.value(1), parseError(6, prematureEOF)])
        #expect(events([utf8("\"abc")]) == [parseError(4, prematureEOF)])
    }

    @Test func truncatedLiteralIsAnError() {
        #expect(events([utf8("[] tr")]) == [.value([]), parseError(5, "lexical error: invalid string in json text.")])
    }

    @Test func cutEscapeAtEndOfStreamIsAnError() {
        #expect(events([utf8("\"\\ud83")]) == [parseError(6, "lexical error: invalid (non-hex) character occurs after '\\u' inside string.")])
        // A high surrogate that the stream ends after has no pair: refused where it stands.
        #expect(events([utf8("\"\\ud83d")]) == [parseError(3, unpairedSurrogate)])
    }

    @Test func nothingPendingGivesNothing() {
        #expect(events([]) == [])
        #expect(events([utf8(" \n ")]) == [])
        #expect(events([utf8("true\n")]) == [.value(true)])
    }

    @Test func theDecoderStartsANewStreamAfterFinish() {
        let decoder = JSONStreamDecoder()
        #expect(decoder.feed(utf8("[1")) == [])
        #expect(decoder.finish() == [parseError(2, prematureEOF)])
        #expect(decoder.feed(utf8("[1,]")) == [parseError(4, unallowedToken)])
        #expect(decoder.finish() == [])
        #expect(decoder.feed(utf8("7")) == [])
        #expect(decoder.finish() == [.value(7)])
    }
}
