import Testing
import JSON

/// After an error the decoder skips to the end of the line and reads the next line afresh.
struct ResyncTests {
    @Test func oneBadLineGivesOneErrorAndTheNextLineParses() {
        let input = utf8("{\"id\":1}\n{\"id\": 2, oops}\n{\"id\":3}\n")
        #expect(events([input]) == [.value(["id": 1]), parseError(20, invalidChar), .value(["id": 3])])
    }

    @Test func theRestOfTheBadLineIsSkippedAcrossFeeds() {
        let decoder = JSONStreamDecoder()
        #expect(decoder.feed(utf8("[1,]xx")) == [parseError(4, unallowedToken)])
        #expect(decoder.feed(utf8("[2] still the bad line")) == [])
        #expect(decoder.feed(utf8(" {\n[3]")) == [.value([3])])
        #expect(decoder.finish() == [])
    }

    @Test func aPartlyBuiltValueIsDropped() {
        #expect(events([utf8("[1,[2,{\"a\":3,]]]\n[4]")]) == [parseError(14, "parse error: invalid object key (must be a string)"), .value([4])])
    }

    /// When the byte yajl fails on is the newline itself, that newline ends the bad line.
    @Test func failingOnTheNewlineDoesNotEatTheNextLine() {
        #expect(events([utf8("{\"a\": \"x\n{\"b\":1}\n")])
            == [parseError(8, "lexical error: invalid character inside string."), .value(["b": 1])])
        #expect(events([utf8("tru\n1\n")]) == [parseError(3, "lexical error: invalid string in json text."), .value(1)])
        #expect(events([utf8("1.\n2\n")])
            == [parseError(2, "lexical error: malformed number, a digit is required after the decimal point."), .value(2)])
    }

    @Test func manyBadLines() {
        let input = utf8("x\ny\n{\"ok\":true}\nz\n")
        #expect(events([input]) == [parseError(1, invalidChar), parseError(3, invalidChar), .value(["ok": true]), parseError(17, invalidChar)])
    }

    @Test func errorAtEndOfStreamInTheMiddleOfTheDiscardedLine() {
        #expect(events([utf8("]garbage without newline")]) == [parseError(1, unallowedToken)])
    }
}
