import Testing
import JSON

/// `JSONObjectWriter` and `EncodedJSON` write the bytes `JSON.encode` writes for the equal
/// value, so a reply written in place reads exactly as one built as a tree.
struct ObjectWriterTests {
    @Test func membersOfEveryKindMatchTheEncoder() {
        let long = String(repeating: "é\"x\n", count: 40)
        var writer = JSONObjectWriter()
        writer.add("s", string: "a\"b\\c\u{01}")
        writer.add("i", int: -9_223_372_036_854_775_808)
        writer.add("v", ["x": [1, 2.5, nil, true], "y": .string(long)])
        writer.add("long", string: long)
        writer.add("e", encoded: EncodedJSON(["k": "v"]))
        writer.addObject("o") { inner in
            inner.add("k\n", string: "")
            inner.addObject("empty") { _ in }
        }
        writer.addObject("none") { _ in }
        let expected: JSONValue = [
            "s": "a\"b\\c\u{01}", "i": .int(Int64.min), "v": ["x": [1, 2.5, nil, true], "y": .string(long)],
            "long": .string(long), "e": ["k": "v"], "o": ["k\n": "", "empty": [:]], "none": [:],
        ]
        let written = writer.finish()
        #expect(written.bytes == JSON.encode(expected))
        #expect(written.decoded() == expected)
    }

    @Test func anEmptyObject() {
        #expect(JSONObjectWriter().finish().bytes == Array("{}".utf8))
    }

    @Test func arraysOfEncodedValuesMatchTheEncoder() {
        let values: [JSONValue] = [["a": 1], "x", [], nil]
        #expect(EncodedJSON.array(values.map(EncodedJSON.init)).bytes == JSON.encode(.array(values)))
        #expect(EncodedJSON.array([]).bytes == Array("[]".utf8))
    }
}
