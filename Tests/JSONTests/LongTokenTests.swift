import Testing
@testable import JSON
import SeededRandom

/// A long string or number arriving over many feeds is held back instead of being shown to
/// yajl feed by feed, which yajl would lex again from its start each time (`OpenTokenTracker`).
/// The events stay exactly those of a decoder that never holds anything back, however the
/// stream is cut, and the size limit strikes at the same feed.
struct LongTokenTests {
    /// A 4 MiB string in 4 KiB pieces: yajl lexes at most 2.5 times the message (1.7 here),
    /// not the ~2 GiB (513 times) it lexed when every piece made it start the string over.
    @Test func aLongStringInSmallPiecesIsLexedLinearly() {
        let text = String(repeating: "a", count: 4 << 20)
        let message = utf8(#"{"jsonrpc":"2.0","method":"server.info","id":1,"params":{"x":""# + text + "\"}}\n")
        let decoder = JSONStreamDecoder()
        var got: [JSONStreamEvent] = []
        for start in stride(from: 0, to: message.count, by: 4096) {
            got += decoder.feed(Array(message[start..<min(start + 4096, message.count)]))
        }
        got += decoder.finish()
        #expect(got == [.value(["jsonrpc": "2.0", "method": "server.info", "id": 1, "params": ["x": .string(text)]])])
        #expect(decoder.bytesLexed <= 3 * message.count, "lexed \(decoder.bytesLexed) bytes of \(message.count)")
    }

    @Test func aLongNumberInOneBytePiecesIsLexedLinearly() {
        let message = utf8("[-" + String(repeating: "7", count: 20_000) + ".5e-3,1]\n")
        let decoder = JSONStreamDecoder()
        var got: [JSONStreamEvent] = []
        for byte in message { got += decoder.feed([byte]) }
        got += decoder.finish()
        #expect(got == [.value([.double(-.infinity), 1])])
        // Up to 4 KiB of it is lexed again at every byte (about 8 MB); all of it would be
        // 20_000² / 2 = 200 MB.
        #expect(decoder.bytesLexed <= 3 * message.count + 4096 * 4096, "lexed \(decoder.bytesLexed)")
    }

    /// Valid JSON with long and short tokens of every kind, cut anywhere.
    static let stream: [UInt8] = {
        let long = String(repeating: "abc\\\"d\\\\e\\u00e9\\ud83d\\ude00\\u0041x/\\n", count: 301)
        let digits = String(repeating: "1234567890", count: 300)
        return utf8(#"{"jsonrpc":"2.0","method":"a","params":[1,2.5,-3e2,true,false,null],"id":1}"# + "\n"
            + #"{"x":""# + long + #"","n":-"# + digits + ".25e+7" + #","t":true}{"a":1}"#
            + "\n" + #"""# + long + #"" [1] "# + digits + " false\tnull\n" + #""\ud83d\ude00" "short""#
            + " " + digits)
    }()

    /// What a decoder that holds nothing back reports, feed by feed.
    static func reference(_ chunks: [[UInt8]], limit: Int = 16 << 20) -> [[JSONStreamEvent]] {
        feedEach(JSONStreamDecoder(maxValueBytes: limit, pickCallEnvelopes: false, holdTokensFrom: .max), chunks)
    }

    static func feedEach(_ decoder: JSONStreamDecoder, _ chunks: [[UInt8]]) -> [[JSONStreamEvent]] {
        chunks.map { decoder.feed($0) } + [decoder.finish()]
    }

    /// The first feed (the last is `finish`) whose events differ, or nil: a short message
    /// for a failure, where the whole lists would be megabytes.
    static func firstDifference(_ a: [[JSONStreamEvent]], _ b: [[JSONStreamEvent]]) -> Int? {
        if a.count != b.count { return -1 }
        return a.indices.first { a[$0] != b[$0] }
    }

    static func pieces(_ input: [UInt8], _ size: (Int) -> Int) -> [[UInt8]] {
        var chunks: [[UInt8]] = []
        var start = 0
        while start < input.count {
            let end = min(input.count, start + max(1, size(chunks.count)))
            chunks.append(Array(input[start..<end]))
            start = end
        }
        return chunks
    }

    static func cuts(_ input: [UInt8], seed: UInt64) -> [[[UInt8]]] {
        var r = SplitMix64(seed: seed)
        var ways = [[input]] + [1, 7, 4096].map { n in pieces(input, { _ in n }) }
        for _ in 0..<20 {
            let most = [3, 40, 700, 9000][r.below(4)]
            ways.append(pieces(input, { _ in r.below(most) + 1 }))
        }
        return ways
    }

    /// Valid input: the same events at the same feeds (a value is never delayed), with
    /// holding from 1 byte (so short tokens are held too) and from the default 4 KiB.
    @Test(arguments: [1, 4096])
    func validInputGivesTheSameEventsAtTheSameFeeds(holdFrom: Int) {
        let whole = events([Self.stream])
        #expect(whole.count == 11)
        #expect(!whole.contains { if case .error = $0 { return true } else { return false } })
        for chunks in Self.cuts(Self.stream, seed: 1) {
            let decoder = JSONStreamDecoder(maxValueBytes: 16 << 20, pickCallEnvelopes: false, holdTokensFrom: holdFrom)
            let got = Self.feedEach(decoder, chunks)
            #expect(Self.firstDifference(got, Self.reference(chunks)) == nil, "cut into \(chunks.count) pieces")
            #expect(got.joined().elementsEqual(whole))
        }
    }

    /// Every cut in three, holding from 1 byte: the same events at the same feeds. Escaped
    /// quotes and runs of backslashes are cut everywhere (a quote after an odd run carried
    /// over from the feed before does not end its string).
    @Test func everySplitOfShortTokens() {
        let input = utf8(#"["\ud83d\ude00x\"y",-12.5e3,true,"\\"]"ab\u00e9" 12 ["\\\"\\\\",{"k\"":"\\\\\""}] null "#)
        let expected = events([input])
        #expect(expected.count == 5)
        for i in 0...input.count {
            for j in i...input.count {
                let chunks = [Array(input[..<i]), Array(input[i..<j]), Array(input[j...])]
                let decoder = JSONStreamDecoder(maxValueBytes: 1000, pickCallEnvelopes: false, holdTokensFrom: 1)
                let got = Self.feedEach(decoder, chunks)
                #expect(Self.firstDifference(got, Self.reference(chunks)) == nil, "split at \(i), \(j)")
                #expect(Array(got.joined()) == expected, "split at \(i), \(j)")
            }
        }
    }

    /// Bad input (a control byte, a bad escape, ill-formed UTF-8, an unpaired surrogate
    /// escape inside long strings, a bad number) gives the same errors at the same offsets and resynchronises the same way.
    @Test(arguments: [1, 4096])
    func errorsAreTheSame(holdFrom: Int) {
        let long = String(repeating: "x", count: 9000)
        var input = utf8(#"{"a":""# + long + "\u{01}" + long + "\"}\n[1]\n")
        input += utf8(#"""# + long + #"\q"# + long + "\"\n2\n")
        input += utf8(#"""# + long) + [0xC0, 0x80] + utf8(long + "\"\n{}\n")
        input += utf8("-" + String(repeating: "1", count: 9000) + ".x\n" + "true\n")
        input += utf8(#"""# + long + #"\ud800"# + long + "\"\n3\n")
        let expected = events([input])
        #expect(expected.filter { if case .error = $0 { return true } else { return false } }.count == 5)
        #expect(expected.contains(.error(JSONParseError(offset: input.count - 9008, message: unpairedSurrogate))))
        #expect(expected.contains(.value(true)) && expected.contains(.value([:])))
        for chunks in Self.cuts(input, seed: 2) {
            let decoder = JSONStreamDecoder(maxValueBytes: 16 << 20, pickCallEnvelopes: false, holdTokensFrom: holdFrom)
            #expect(Self.feedEach(decoder, chunks).joined().elementsEqual(expected), "cut into \(chunks.count) pieces")
        }
    }

    /// A long string over the limit is `.tooLarge` at the same feed as without holding
    /// (also when the limit falls inside it), and a long value exactly at the limit is fine.
    @Test(arguments: [1, 4096])
    func theLimitStrikesAtTheSameFeed(holdFrom: Int) {
        let limit = 12_000
        let fits = String(repeating: "y", count: limit - 2)
        let cases: [(input: [UInt8], last: JSONStreamEvent)] = [
            (utf8("[1] \"" + fits + "\"\n"), .value(.string(fits))),
            (utf8("[1] \"" + fits + "y\"\n[2]\n"), .tooLarge(limit: limit)),
            // Over the limit while the string is still open (and held back).
            (utf8("[1] \"" + fits + fits + "\"\n[2]\n"), .tooLarge(limit: limit)),
        ]
        for (input, last) in cases {
            for chunks in Self.cuts(input, seed: 3) {
                let decoder = JSONStreamDecoder(maxValueBytes: limit, pickCallEnvelopes: false,
                                                holdTokensFrom: holdFrom)
                let got = Self.feedEach(decoder, chunks)
                let reference = Self.reference(chunks, limit: limit)
                #expect(Self.firstDifference(got, reference) == nil, "cut into \(chunks.count) pieces")
                #expect(got.joined().last == last)
            }
        }
    }

    /// A long bare number held back at the end of the stream comes out at `finish`.
    @Test func heldBytesComeOutAtFinish() {
        let digits = String(repeating: "9", count: 30_000)
        let decoder = JSONStreamDecoder()
        var got: [JSONStreamEvent] = []
        for chunk in Self.pieces(utf8("[0] " + digits), { _ in 1000 }) { got += decoder.feed(chunk) }
        #expect(got == [.value([0])])
        #expect(decoder.finish() == [.value(.bigInteger(digits))])
    }
}
