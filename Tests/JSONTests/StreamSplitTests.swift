import Testing
import JSON

/// However a stream is cut into feeds, the decoder reports the same events: values split
/// anywhere, many values in one feed, and errors at the same absolute offsets.
struct StreamSplitTests {
    static let stream = utf8(
        #"{"jsonrpc":"2.0","method":"a","params":[1,2.5,-3e2,true,false,null],"id":1}"# + "\n"
            + #"[ {"k":"\u00e9\ud83d\ude00"} ]42 "str\"ing" true"# + "\t-7.5e-3\n"
            + #""\ud800x""# + "\n" + #"{}[]"\\ud800""# + "\n" + #""\udc00"  0"# + "\r\n\u{0B}\u{0C}null 123")

    static let expected: [JSONStreamEvent] = [
        .value(["jsonrpc": "2.0", "method": "a", "params": [1, 2.5, -300.0, true, false, nil], "id": 1]),
        .value([["k": "é😀"]]),
        .value(42),
        .value("str\"ing"),
        .value(true),
        .value(-0.0075),
        parseError(136, unpairedSurrogate),  // the rest of its line is skipped
        .value([:]),
        .value([]),
        .value("\\ud800"),
        parseError(160, unpairedSurrogate),  // and the 0 after it
        .value(nil),
        .value(123),
    ]

    @Test func wholeStream() {
        #expect(events([Self.stream]) == Self.expected)
    }

    @Test func everySplitGivesTheSameEvents() {
        for chunks in everySplit(Self.stream) {
            let got = events(chunks)
            #expect(got == Self.expected, "split into \(chunks.map(\.count))")
        }
    }

    @Test func valuesAreReportedAsSoonAsTheyEnd() {
        let decoder = JSONStreamDecoder()
        #expect(decoder.feed(utf8("{\"a\":")) == [])
        #expect(decoder.feed(utf8("1}")) == [.value(["a": 1])])
        #expect(decoder.feed(utf8("[1] [2")) == [.value([1])])
        #expect(decoder.feed(utf8("]true")) == [.value([2]), .value(true)])
        // A bare number might go on, so it waits for the next byte.
        #expect(decoder.feed(utf8("17")) == [])
        #expect(decoder.feed(utf8("\n")) == [.value(17)])
        #expect(decoder.finish() == [])
    }

    /// Two splits at every pair of positions, over a stream with escapes cut everywhere.
    @Test func everyPairOfSplits() {
        let input = utf8(#"["\ud83d\ude00",1]"\u00e9\\"7 "# + "\n" + #""\ud800\\""# + "\n8 ")
        let expected: [JSONStreamEvent] = [.value(["😀", 1]), .value("é\\"), .value(7), parseError(34, unpairedSurrogate),
                                           .value(8)]
        for i in 0...input.count {
            for j in i...input.count {
                let chunks = [Array(input[..<i]), Array(input[i..<j]), Array(input[j...])]
                #expect(events(chunks) == expected, "split at \(i), \(j)")
            }
        }
    }

    @Test func errorsAndResyncAreTheSameAtEverySplit() {
        let input = utf8("{\"a\":1}\n{\"bad\" 1}\n[1]\n\"x\ny\"\n tru\n2\n")
        let expected: [JSONStreamEvent] = [
            .value(["a": 1]),
            parseError(16, "parse error: object key and value must be separated by a colon (':')"),
            .value([1]),
            parseError(24, "lexical error: invalid character inside string."),
            // The raw newline ended the bad line, so `y"` is a line of its own, also bad.
            parseError(26, invalidChar),
            parseError(32, "lexical error: invalid string in json text."),
            .value(2),
        ]
        for chunks in everySplit(input) {
            #expect(events(chunks) == expected, "split into \(chunks.map(\.count))")
        }
    }
}
