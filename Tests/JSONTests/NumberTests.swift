import Testing
import JSON

/// Integer literals that fit in Int64 stay exact; every other number is a double read the
/// way strtod reads it.
struct NumberTests {
    @Test func int64Bounds() throws {
        #expect(try JSON.decode("9223372036854775807") == .int(Int64.max))
        #expect(try JSON.decode("-9223372036854775808") == .int(Int64.min))
        #expect(try JSON.decode("0") == .int(0))
        #expect(try JSON.decode("-0") == .int(0))
    }

    @Test func integersBeyondInt64BecomeDoubles() throws {
        #expect(try JSON.decode("9223372036854775808") == .double(9223372036854775808.0))
        #expect(try JSON.decode("-9223372036854775809") == .double(-9223372036854775809.0))
        #expect(try JSON.decode("123456789012345678901234567890") == .double(1.2345678901234568e29))
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
