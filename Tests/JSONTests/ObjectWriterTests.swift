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

    /// Members whose text comes as UTF-8 bytes (header fields, a fetched body) read as
    /// the strings of those bytes would.
    @Test func membersFromUTF8BytesMatchTheEncoder() {
        let key = "k\u{e9}\"y", parts = ["a\"b\\", "", "\u{01}\u{e9}\n", "\u{1F600}"]
        var writer = JSONObjectWriter()
        Array(key.utf8).withUnsafeBufferPointer { k in
            writer.addString(utf8Key: k) { append in
                for part in parts { Array(part.utf8).withUnsafeBufferPointer(append) }
            }
        }
        Array(parts[2].utf8).withUnsafeBufferPointer { writer.add("body", utf8String: $0) }
        writer.addString(utf8Key: UnsafeBufferPointer(start: nil, count: 0)) { _ in }
        let expected: JSONValue = [key: .string(parts.joined()), "body": .string(parts[2]), "": ""]
        #expect(writer.finish().bytes == JSON.encode(expected))
    }

    /// Keys written once (`JSONKey`) read as the same names given as strings, first
    /// member or not, escapes included, nested objects too.
    @Test func keysWrittenOnceMatchTheEncoder() {
        let plain = JSONKey("jsonrpc"), escaped = JSONKey("a\"b\n\u{e9}"), empty = JSONKey("")
        var writer = JSONObjectWriter()
        writer.add(escaped, int: 1)
        writer.add(plain, encoded: EncodedJSON("2.0"))
        writer.addObject(plain) { inner in
            inner.add(empty, [1, "x"])
            inner.add(escaped, nil)
            inner.addObject(JSONKey("n")) { _ in }
        }
        writer.add(empty, "last")
        let expected = #"{"a\"b\n\#u{e9}":1,"jsonrpc":"2.0","jsonrpc":{"":[1,"x"],"a\"b\n\#u{e9}":null,"n":{}},"":"last"}"#
        #expect(writer.finish().bytes == Array(expected.utf8))
        var first = JSONObjectWriter()
        first.add(plain, nil)
        #expect(first.finish().bytes == JSON.encode(["jsonrpc": nil]))
    }

    /// A string member whose text is handed over in pieces (base64) reads as the same
    /// string given as a `String`, empty or not, first member or not.
    @Test func textWrittenInPiecesMatchesTheEncoder() {
        let key = JSONKey("data"), text = Array("QUJD+/8=".utf8)
        var writer = JSONObjectWriter()
        writer.add(key, unescapedStringOfCount: text.count) { append in
            text.withUnsafeBufferPointer { all in
                append(UnsafeBufferPointer(rebasing: all[..<3]))
                append(UnsafeBufferPointer(rebasing: all[3...]))
            }
        }
        writer.add(JSONKey("empty"), unescapedStringOfCount: 0) { _ in }
        #expect(writer.finish().bytes == JSON.encode(["data": "QUJD+/8=", "empty": ""]))
    }

    /// An object member whose writing throws rethrows, and the writer is still usable.
    @Test func anObjectWhoseWritingThrowsRethrows() {
        struct Refused: Error {}
        var writer = JSONObjectWriter()
        #expect(throws: Refused.self) {
            try writer.addObject(JSONKey("result")) { o in
                o.add(JSONKey("a"), int: 1)
                throw Refused()
            }
        }
        writer.add(JSONKey("b"), int: 2)
        #expect(String(decoding: writer.finish().bytes, as: UTF8.self).hasSuffix(#","b":2}"#))
    }

    /// Members written once (`JSONConstantMembers`) read as the same members added one
    /// by one, first in the object or after others; none adds nothing.
    @Test func constantMembersMatchTheEncoder() {
        let constant = JSONConstantMembers(["name": "x\"y", "n": 2, "o": ["a": [nil]]])
        var first = JSONObjectWriter()
        first.add(constant)
        first.add(JSONConstantMembers([:]))
        first.add("k", int: 1)
        #expect(first.finish().bytes == JSON.encode(["name": "x\"y", "n": 2, "o": ["a": [nil]], "k": 1]))
        var after = JSONObjectWriter()
        after.add(JSONConstantMembers([:]))
        after.add("k", int: 1)
        after.add(constant)
        #expect(after.finish().bytes == JSON.encode(["k": 1, "name": "x\"y", "n": 2, "o": ["a": [nil]]]))
        var none = JSONObjectWriter()
        none.add(JSONConstantMembers([:]))
        #expect(none.finish().bytes == Array("{}".utf8))
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
