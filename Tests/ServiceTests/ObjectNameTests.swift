@testable import Service
import Testing

/// Generated names: the prefix and 32 lower-case hex digits, never the same twice, across
/// more than one refill of the random pool, and drawn again when `taken` says so.
struct ObjectNameTests {
    @Test func generatedNamesAreDistinctHex() {
        var seen = Set<String>()
        for _ in 0..<100 {
            let name = ObjectName.generate(prefix: "t_") { _ in false }
            #expect(name.hasPrefix("t_") && name.utf8.count == 34)
            #expect(name.dropFirst(2).allSatisfy { $0.isHexDigit && !$0.isUppercase })
            seen.insert(name)
        }
        #expect(seen.count == 100)
    }

    /// The digits of both halves, most significant first, leading zeros kept (what
    /// `String(v, radix: 16)` padded to 16 gave).
    @Test func namesSpellTheirBitsInFixedWidthHex() {
        #expect(ObjectName.named("fetch_", hex: 0x0123_4567_89AB_CDEF, 0xA) == "fetch_0123456789abcdef000000000000000a")
        #expect(ObjectName.named("", hex: .max, 0) == "ffffffffffffffff0000000000000000")
    }

    /// Plain names: letters, digits and the characters given, nothing else (no space,
    /// slash, non-ASCII), not empty and not over the limit.
    @Test func plainNamesTakeOnlyTheirCharacters() {
        #expect(ObjectName.isPlainName("a.b:c_d-9Z", maxBytes: 128, also: ".:_-"))
        #expect(!ObjectName.isPlainName("a.b", maxBytes: 128, also: "_-"))
        for bad in ["", "a b", "a/b", "é", "a\u{0}", String(repeating: "x", count: 129)] {
            #expect(!ObjectName.isPlainName(bad, maxBytes: 128, also: ".:_-"), "\(bad)")
        }
        #expect(!ObjectName.isValid("req_mine") && ObjectName.isValid("mine"))
    }

    @Test func aTakenNameIsDrawnAgain() {
        var asked = [String]()
        let name = ObjectName.generate { candidate in
            asked.append(candidate)
            return asked.count < 3
        }
        #expect(asked.count == 3 && name == asked[2] && Set(asked).count == 3)
    }
}
