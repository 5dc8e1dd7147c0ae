import Testing
import JSON

/// Every kind of value survives encode → decode unchanged, and encodes to the exact
/// compact text expected.
struct RoundTripTests {
    static let cases: [(JSONValue, String)] = [
        (.null, "null"),
        (.bool(true), "true"),
        (.bool(false), "false"),
        (.int(0), "0"),
        (.int(-42), "-42"),
        (.int(Int64.max), "9223372036854775807"),
        (.int(Int64.min), "-9223372036854775808"),
        (.double(0.1), "0.1"),
        (.double(1e300), "1e+300"),
        (.double(-2.5), "-2.5"),
        (.double(1.0), "1.0"),
        (.double(Double.leastNonzeroMagnitude), "5e-324"),
        (.double(Double.greatestFiniteMagnitude), "1.7976931348623157e+308"),
        (.string(""), "\"\""),
        (.string("hello"), "\"hello\""),
        (.array([]), "[]"),
        (.object([:]), "{}"),
        (.array([1, "two", [3.5, nil], ["k": false]]), "[1,\"two\",[3.5,null],{\"k\":false}]"),
        (["jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1],
         "{\"jsonrpc\":\"2.0\",\"method\":\"subtract\",\"params\":[42,23],\"id\":1}"),
        (["nested": ["a": ["b": ["c": []]]]], "{\"nested\":{\"a\":{\"b\":{\"c\":[]}}}}"),
    ]

    @Test(arguments: 0..<cases.count)
    func encodesExactlyAndDecodesBack(_ index: Int) throws {
        let (value, text) = Self.cases[index]
        #expect(JSON.encodeString(value) == text)
        #expect(JSON.encode(value) == utf8(text))
        #expect(try JSON.decode(text) == value)
        #expect(try JSON.decode(JSON.encode(value)) == value)
    }

    @Test func negativeZeroKeepsItsSign() throws {
        #expect(JSON.encodeString(.double(-0.0)) == "-0.0")
        guard case .double(let d) = try JSON.decode("-0.0") else {
            Issue.record("-0.0 did not decode as a double")
            return
        }
        #expect(d == 0 && d.sign == .minus)
    }

    @Test func objectMemberOrderSurvives() throws {
        let text = "{\"z\":1,\"a\":2,\"m\":3}"
        let value = try JSON.decode(text)
        #expect(value.objectValue?.keys == ["z", "a", "m"])
        #expect(JSON.encodeString(value) == text)
    }

    @Test func encodeIntoAppends() {
        var buffer = utf8("prefix:")
        JSON.encode(["a": 1], into: &buffer)
        JSON.encode([true], into: &buffer)
        #expect(String(decoding: buffer, as: UTF8.self) == "prefix:{\"a\":1}[true]")
    }

    @Test func nonFiniteDoublesEncodeAsNull() {
        #expect(JSON.encodeString([.double(.nan), .double(.infinity), .double(-.infinity)]) == "[null,null,null]")
    }
}
