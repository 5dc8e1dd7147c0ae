import Testing
import JSON

/// `JSON.decode` takes exactly one value with optional whitespace around it.
struct DocumentDecodeTests {
    @Test func surroundingWhitespaceIsAllowed() throws {
        #expect(try JSON.decode(" \n\t{\"a\":[1]}\r\n ") == ["a": [1]])
        #expect(try JSON.decode(" 42 ") == .int(42))
        #expect(try JSON.decode("42") == .int(42))
        #expect(try JSON.decode("\"s\"") == .string("s"))
    }

    @Test func nothingIsAnError() {
        #expect(decodeError("") == JSONParseError(offset: 0, message: prematureEOF))
        #expect(decodeError("   ") == JSONParseError(offset: 3, message: prematureEOF))
    }

    @Test func aSecondValueIsAnError() {
        #expect(decodeError("{} {}") == JSONParseError(offset: 4, message: "parse error: trailing garbage"))
        #expect(decodeError("1 2") == JSONParseError(offset: 3, message: "parse error: trailing garbage"))
        #expect(decodeError("[1]x") == JSONParseError(offset: 4, message: "parse error: trailing garbage"))
    }

    @Test func unterminatedIsAnError() {
        #expect(decodeError("[1,2,3") == JSONParseError(offset: 6, message: prematureEOF))
        #expect(decodeError("\"abc") == JSONParseError(offset: 4, message: prematureEOF))
    }

    @Test func anyByteCollectionWorks() throws {
        let bytes = utf8("[true,null]")
        #expect(try JSON.decode(bytes[...]) == [true, nil])
        #expect(try JSON.decode(bytes.lazy.map { $0 }) == [true, nil])
    }
}
