import Foundation
import Testing

@testable import Service

/// `Base64Text` writes what Foundation's `base64EncodedString()` writes, which is what
/// clients decoded before it: every tail length (0, 1 or 2 bytes after the last full
/// group), every byte value, a slice that does not start at its array's start, and texts
/// handed over in pieces (`encode(_:inPieces:)`, a read's `data` and fetch's `body`).
struct Base64TextTests {
    /// The text of `bytes` as the service writes it, its pieces joined, and their number.
    private func text(_ bytes: ArraySlice<UInt8>) -> (text: String, pieces: Int) {
        var text: [UInt8] = [], pieces = 0
        bytes.withUnsafeBufferPointer { all in
            Base64Text.encode(all, inPieces: { text.append(contentsOf: $0); pieces += 1 })
        }
        #expect(text.count == Base64Text.encodedCount(bytes.count))
        return (String(decoding: text, as: UTF8.self), pieces)
    }

    @Test func matchesFoundation() {
        for length in 0...300 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 97 &+ length &* 31) }
            #expect(text(bytes[...]).text == Data(bytes).base64EncodedString(), "\(length) bytes")
        }
        let every = (0...255).map(UInt8.init)
        #expect(text(every[...]).text == Data(every).base64EncodedString())
        #expect(text(every[7..<100]).text == Data(every[7..<100]).base64EncodedString())
    }

    /// Pieces join into the text of the whole, for lengths around the pieces' boundaries
    /// (`pieceBytes`, a multiple of 3) and for none at all.
    @Test func piecesJoinIntoTheText() {
        let piece = Base64Text.pieceBytes
        for length in [0, 1, 2, 3, piece - 1, piece, piece + 1, piece + 2, 2 * piece, 2 * piece + 5] {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 53 &+ 7) }
            let (text, pieces) = text(bytes[...])
            #expect(text == Data(bytes).base64EncodedString(), "\(length) bytes")
            #expect(pieces == (length + piece - 1) / piece, "\(length) bytes")
        }
    }

    @Test func knownVectors() {
        // RFC 4648 section 10.
        let vectors = ["": "", "f": "Zg==", "fo": "Zm8=", "foo": "Zm9v", "foob": "Zm9vYg==", "fooba": "Zm9vYmE=", "foobar": "Zm9vYmFy"]
        for (plain, encoded) in vectors {
            #expect(text(Array(plain.utf8)[...]).text == encoded)
        }
    }

    /// Reading is strict (RFC 4648 §4), issue 41: Foundation's decoder took `eA===`
    /// while refusing `eA`. Every byte value reads back, every padding that is right
    /// reads, and nothing else does.
    @Test func decodingIsStrict() {
        for length in 0...300 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 97 &+ length &* 31) }
            #expect(Base64Text.decode(Data(bytes).base64EncodedString()) == bytes, "\(length) bytes")
        }
        #expect(Base64Text.decode("eA==") == Array("x".utf8))
        #expect(Base64Text.decode("eHk=") == Array("xy".utf8))
        #expect(Base64Text.decode("+/+/") == [0xFB, 0xFF, 0xBF])
        for bad in ["eA", "eA=", "eA===", "e===", "====", "=eA=", "eA==eA==", "eA=A", "eA\n==", " eA==", "eA==\n",
                    "e-A=", "eA_=", "\u{E9}A==", "eHk", "eHl6e"] {
            #expect(Base64Text.decode(bad) == nil, "\(bad.debugDescription)")
        }
    }
}
