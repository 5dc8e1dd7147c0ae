import Foundation
import Testing

@testable import Service

/// `Base64Text.encode` writes what Foundation's `base64EncodedString()` writes, which is
/// what clients decoded before it: every tail length (0, 1 or 2 bytes after the last
/// full group), every byte value, and a slice that does not start at its array's start.
struct Base64TextTests {
    @Test func matchesFoundation() {
        for length in 0...300 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 97 &+ length &* 31) }
            #expect(Base64Text.encode(bytes[...]) == Data(bytes).base64EncodedString(), "\(length) bytes")
        }
        let every = (0...255).map(UInt8.init)
        #expect(Base64Text.encode(every[...]) == Data(every).base64EncodedString())
        #expect(Base64Text.encode(every[7..<100]) == Data(every[7..<100]).base64EncodedString())
    }

    /// The text written into a buffer of `encodedCount` bytes (getReceiveBuffer's
    /// member) is the same text, filling the buffer.
    @Test func writtenInPlaceMatchesTheString() {
        for length in 0...40 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 53 &+ 7) }
            let text = [UInt8](unsafeUninitializedCapacity: Base64Text.encodedCount(length)) { out, n in
                out.initialize(repeating: 0)
                bytes.withUnsafeBufferPointer { Base64Text.encode($0, into: out) }
                n = out.count
            }
            #expect(text == Array(Base64Text.encode(bytes[...]).utf8), "\(length) bytes")
        }
    }

    /// The text handed over in pieces joins into the same text, for lengths around the
    /// pieces' boundaries (`pieceBytes`, a multiple of 3) and for none at all.
    @Test func piecesJoinIntoTheString() {
        let piece = Base64Text.pieceBytes
        for length in [0, 1, 2, 3, piece - 1, piece, piece + 1, piece + 2, 2 * piece, 2 * piece + 5] {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 53 &+ 7) }
            var text: [UInt8] = [], pieces = 0
            bytes.withUnsafeBufferPointer { all in
                Base64Text.encode(all, inPieces: { text.append(contentsOf: $0); pieces += 1 })
            }
            #expect(text == Array(Base64Text.encode(bytes[...]).utf8), "\(length) bytes")
            #expect(pieces == (length + piece - 1) / piece, "\(length) bytes")
        }
    }

    @Test func knownVectors() {
        // RFC 4648 section 10.
        let vectors = ["": "", "f": "Zg==", "fo": "Zm8=", "foo": "Zm9v", "foob": "Zm9vYg==", "fooba": "Zm9vYmE=", "foobar": "Zm9vYmFy"]
        for (plain, encoded) in vectors {
            #expect(Base64Text.encode(Array(plain.utf8)[...]) == encoded)
        }
    }
}
