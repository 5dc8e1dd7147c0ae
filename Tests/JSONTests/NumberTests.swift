import Testing
import JSON

/// Integer literals stay exact: in Int64 when they fit, else as their digits; every other
/// number is a double read the way strtod reads it.
struct NumberTests {
    @Test func int64Bounds() throws {
        #expect(try JSON.decode("9223372036854775807") == .int(Int64.max))
        #expect(try JSON.decode("-9223372036854775808") == .int(Int64.min))
        #expect(try JSON.decode("0") == .int(0))
        #expect(try JSON.decode("-0") == .int(0))
    }

    /// Issue 41: they were doubles, so an id past 2^63 came back rounded.
    @Test func integersBeyondInt64KeepTheirDigits() throws {
        for text in ["9223372036854775808", "-9223372036854775809", "18446744073709551616",
                     "123456789012345678901234567890", "-" + String(repeating: "9", count: 400)] {
            let value = try JSON.decode(text)
            #expect(value == .bigInteger(text))
            #expect(JSON.encodeString(value) == text)
            #expect(JSON.encodeString(try JSON.decode("[" + text + ",1]")) == "[" + text + ",1]")
        }
        #expect(try JSON.decode("18446744073709551616").doubleValue == 18446744073709551616.0)
        #expect(try JSON.decode("18446744073709551616").int64Value == nil)
        // Cut at every byte, the digits come out whole.
        let input = utf8("[99999999999999999999] -99999999999999999999 7\n")
        for chunks in everySplit(input) {
            #expect(events(chunks) == [.value([.bigInteger("99999999999999999999")]),
                                       .value(.bigInteger("-99999999999999999999")), .value(7)])
        }
    }

    @Test func fractionsAndExponentsAreDoubles() throws {
        #expect(try JSON.decode("0.1") == .double(0.1))
        #expect(try JSON.decode("1e300") == .double(1e300))
        #expect(try JSON.decode("1E2") == .double(100))
        #expect(try JSON.decode("2.0") == .double(2))
        #expect(try JSON.decode("-1.5e-3") == .double(-0.0015))
        #expect(try JSON.decode("5e-324") == .double(Double.leastNonzeroMagnitude))
    }

    @Test func overflowIsInfinityAndUnderflowIsZero() throws {
        #expect(try JSON.decode("1e999") == .double(.infinity))
        #expect(try JSON.decode("-1e999") == .double(-.infinity))
        #expect(try JSON.decode("1e-999") == .double(0))
    }

    @Test func shortestRoundTripTextIsWritten() {
        #expect(JSON.encodeString(.double(0.1 + 0.2)) == "0.30000000000000004")
        #expect(JSON.encodeString(.double(1e16)) == "1e+16")
        #expect(JSON.encodeString(.double(1e-7)) == "1e-07")
        #expect(JSON.encodeString(.double(123.456)) == "123.456")
    }

    @Test func doublesRoundTripBitForBit() throws {
        for d in [0.1, 1e300, Double.leastNonzeroMagnitude, 2.2250738585072014e-308, 1.7976931348623157e308, 3.141592653589793, 1e23] {
            #expect(try JSON.decode(JSON.encode(.double(d))) == .double(d))
        }
    }

    @Test func malformedNumbersAreErrors() {
        #expect(decodeError("01") == JSONParseError(offset: 2, message: "parse error: trailing garbage"))
        #expect(decodeError("1.") != nil)
        #expect(decodeError("-") != nil)
        #expect(decodeError("+1") != nil)
        #expect(decodeError(".5") != nil)
    }
}
