import Testing
@testable import JSON

/// Nesting is bounded on input (a million-deep value would overflow the stack when
/// destroyed) and unbounded on output (yajl_gen's own limit of 128 is worked around).
struct NestingDepthTests {
    static func nested(_ depth: Int) -> String {
        String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
    }

    @Test func maximumDepthDecodes() throws {
        let value = try JSON.decode(Self.nested(YajlValueParser.maxDepth))
        #expect(JSON.encodeString(value) == Self.nested(YajlValueParser.maxDepth))
    }

    @Test func oneLevelDeeperIsAnError() {
        let depth = YajlValueParser.maxDepth + 1
        let error = JSONParseError(offset: depth, message: "parse error: nesting deeper than 512 levels")
        #expect(decodeError(Self.nested(depth)) == error)
        #expect(events([utf8(Self.nested(depth) + "\n[1]")]) == [.error(error), .value([1])])
    }

    @Test func deepValuesEncodeBeyondYajlsLimit() throws {
        var value: JSONValue = ["leaf": 1]
        for i in 0..<300 { value = i % 2 == 0 ? [value, .int(Int64(i))] : ["k": value] }
        let text = JSON.encodeString(value)
        #expect(try JSON.decode(text) == value)
        #expect(text.hasSuffix(",298]}"))
    }
}
