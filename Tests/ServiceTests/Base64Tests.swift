import Foundation
import Testing

@testable import Service

/// `Base64.encode` gives Foundation's text for every length (each remainder, the empty
/// input, every byte value) and for slices that do not start at index 0.
struct Base64Tests {
    @Test func matchesFoundationAtEveryLength() {
        for length in 0...300 {
            // Bytes of every value, in an order that varies with the length.
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 7 ^ length) }
            #expect(Base64.encode(bytes) == Data(bytes).base64EncodedString(), "\(length) bytes")
        }
        let all = Array(0...255).map(UInt8.init)
        #expect(Base64.encode(all) == Data(all).base64EncodedString())
        #expect(Base64.encode(Array("Man".utf8)) == "TWFu")
        #expect(Base64.encode(Array("Ma".utf8)) == "TWE=")
        #expect(Base64.encode(Array("M".utf8)) == "TQ==")
        #expect(Base64.encode([UInt8]()) == "")
    }

    @Test func slicesStartWhereTheyStart() {
        let bytes = Array(0..<100).map(UInt8.init)
        for start in [0, 1, 2, 3, 50] {
            #expect(Base64.encode(bytes[start..<(start + 40)]) == Data(bytes[start..<(start + 40)]).base64EncodedString())
        }
    }
}
