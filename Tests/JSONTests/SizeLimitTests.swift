import Testing
import JSON

/// A value of more than maxValueBytes is reported as soon as its (limit + 1)th byte
/// arrives; one of exactly the limit is fine, and so are many small values in one feed.
struct SizeLimitTests {
    @Test func exactlyAtTheLimitIsAccepted() {
        for text in ["[1,2,3,45]", "\"12345678\"", "1234567890", "{\"a\":1234}"] {
            for chunks in everySplit(utf8("  " + text + "\n  " + text + " ")) {
                #expect(events(chunks, limit: 10) == [.value(try! JSON.decode(text)), .value(try! JSON.decode(text))])
            }
        }
    }

    @Test func oneByteOverIsTooLarge() {
        for text in ["[1,2,3,456]", "\"123456789\"", "12345678901", "{\"a\":12345}"] {
            for chunks in everySplit(utf8("  " + text + "\n")) {
                #expect(events(chunks, limit: 10) == [.tooLarge(limit: 10)], "\(text) split \(chunks.map(\.count))")
            }
        }
    }

    /// Escapes cut by a feed are held back briefly; the limit still counts exactly.
    @Test func exactWithEscapesCutAnywhere() {
        let atLimit = #"["\ud83d\ude00\u00e9"]"#  // 22 bytes
        for chunks in everySplit(utf8(atLimit + "\n")) {
            #expect(events(chunks, limit: 22) == [.value(["😀é"])])
            #expect(events(chunks, limit: 21) == [.tooLarge(limit: 21)])
        }
    }

    @Test func aNumberExactlyAtTheLimitEndingTheStream() {
        #expect(events([utf8("1234567890")], limit: 10) == [.value(1234567890)])
    }

    @Test func reportedWhenTheByteAfterTheLimitArrives() {
        let decoder = JSONStreamDecoder(maxValueBytes: 100)
        #expect(decoder.feed(utf8("   ")) == [])
        #expect(decoder.feed(utf8("[")) == [])
        for _ in 0..<49 { #expect(decoder.feed(utf8("1,")) == []) }
        #expect(decoder.feed(utf8("1")) == [])  // 100 bytes: still possibly fine
        #expect(decoder.feed(utf8(",")) == [.tooLarge(limit: 100)])
        // Dead: nothing more, not even from finish.
        #expect(decoder.feed(utf8("]\n[1]\n")) == [])
        #expect(decoder.finish() == [])
    }

    @Test func aHugeStringIsStoppedAtTheLimitWithoutBuffering() {
        let decoder = JSONStreamDecoder(maxValueBytes: 1000)
        #expect(decoder.feed(utf8("\"")) == [])
        let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 999)
        #expect(decoder.feed(chunk) == [])
        #expect(decoder.feed(chunk) == [.tooLarge(limit: 1000)])
    }

    @Test func manySmallValuesInOneBigFeed() {
        var input: [UInt8] = []
        for i in 0..<10_000 { input += utf8("{\"id\":\(i % 100)}\n") }
        let got = events([input], limit: 16)
        #expect(got.count == 10_000)
        #expect(got.first == .value(["id": 0]))
        #expect(got.last == .value(["id": 99]))
        #expect(!got.contains(.tooLarge(limit: 16)))
    }

    @Test func aLargeValueAfterSmallOnesInTheSameFeed() {
        #expect(events([utf8("[1] [1,2,3,4,5,6]")], limit: 10) == [.value([1]), .tooLarge(limit: 10)])
        #expect(events([utf8("[1][1,2,3,4]")], limit: 10) == [.value([1]), .value([1, 2, 3, 4])])
    }

    @Test func discardedGarbageBeyondTheLimitIsTooLarge() {
        let ok = utf8("@" + String(repeating: "x", count: 10) + "\n[1]")
        #expect(events([ok], limit: 10) == [parseError(1, invalidChar), .value([1])])
        let over = utf8("@" + String(repeating: "x", count: 11) + "\n[1]")
        for chunks in everySplit(over) {
            #expect(events(chunks, limit: 10) == [parseError(1, invalidChar), .tooLarge(limit: 10)])
        }
    }

    /// The limit raised between feeds (a connection that has authenticated) lets the
    /// value open then, and the next ones, grow to the new limit, cut anywhere; before
    /// the raise the old one holds.
    @Test func aRaisedLimitAppliesFromTheNextFeed() {
        let big = "[" + String(repeating: "1,", count: 20) + "1]"  // 43 bytes
        for cut in 1..<10 {
            let decoder = JSONStreamDecoder(maxValueBytes: 10)
            let bytes = utf8(big + "\n" + big + "\n")
            #expect(decoder.feed(Array(bytes[..<cut])) == [])
            decoder.raiseLimit(to: 100)
            decoder.raiseLimit(to: 5)  // never lowered
            let value = try! JSON.decode(big)
            #expect(decoder.feed(Array(bytes[cut...])) + decoder.finish() == [.value(value), .value(value)], "cut at \(cut)")
        }
        let decoder = JSONStreamDecoder(maxValueBytes: 10)
        #expect(decoder.feed(utf8(big)) == [.tooLarge(limit: 10)])
    }
}
