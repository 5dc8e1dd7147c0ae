import Foundation
import Testing
@testable import HTTPEngine

/// The engine's own decoder, alone (no I/O): each coding decodes byte-exact however the
/// body is split, a body cut anywhere before its stream ends is `unfinished`, and a
/// sink that refuses gets the same bytes again when the raw bytes are offered again,
/// as libcurl offers them after a pause.
@Suite struct ContentDecoderTests {
    /// "xhrpc decodes this body. " 1,000 times (25,000 bytes: more than one output
    /// buffer), coded by Python's zlib and brotli and the zstd command.
    static let plain = [UInt8](String(repeating: "xhrpc decodes this body. ", count: 1000).utf8)
    static let coded: [String: (contentEncoding: String, base64: String)] = [
        "gzip": ("gzip", "H4sIAAAAAAAAA+3JwQ2AIBAAsFVuAoeSI8EXBnzg9uxB2m9XG2+JrKVnnfG1Z8bd879iCSGEEEIIIYQQQgghhBBCCCGEEEIIIYQQQgghhBBCCCGEEEIIIYQQQgghhBBCCCGEEEIIIYQQQgghhBBCnBUbLJ0xPahhAAA="),
        "deflate": ("deflate", "eJztycENgCAQALBVbgKHkiPBFwZ84PbsQdpvVxtviaylZ53xtWfG3fO/YgkhhBBCCCGEEEIIIYQQQgghhBBCCCGEEEIIIYQQQgghhBBCCCGEEEIIIYQQQgghhBBCCCGEEEIIIYQQQpwVG95RaI4="),
        "rawDeflate": ("deflate", "7cnBDYAgEACwVW4Ch5IjwRcGfOD27EHab1cbb4mspWed8bVnxt3zv2IJIYQQQgghhBBCCCGEEEIIIYQQQgghhBBCCCGEEEIIIYQQQgghhBBCCCGEEEIIIYQQQgghhBBCCCGEEEKcFRs="),
        "br": ("br", "G6dh+EVPlupz/7+RGIJa6LBCoSB/TBMyS15c5OBJWQAA"),
        "zstd": ("zstd", "KLUv/WSoYA0BAMh4aHJwYyBkZWNvZGVzIHRoaXMgYm9keS4gAQAxhrzPMbojahQ="),
        "gzipThenBr": ("gzip, br", "G3kA+K8LuMNkHS9gEDY8YihTJlpMWF3c/VYT51qkzSq1z5tsbQNKSxtvWKKfXQWb3K4NCGvB5Vu3fV1pZwVrfDYEz9cve44i0FmFwALklQDsAF8GhQKkhsZNf9E0Pwpv7qyOq/4tJVWpmFg73jhc70kAAA=="),
    ]
    static let names = ["gzip", "deflate", "rawDeflate", "br", "zstd", "gzipThenBr"]

    /// Feeds `raw` in pieces ending at `cuts`, offering a refused piece again as
    /// libcurl does after an unpause; the sink refuses every `refuseEvery`-th offer
    /// (0: never).
    static func run(_ contentEncoding: String, _ raw: [UInt8], cuts: [Int], refuseEvery: Int = 0) throws
        -> (out: [UInt8], outcome: ContentDecoder.Outcome, unfinished: String?, refusals: Int) {
        let d = try #require(ContentDecoder(contentEncoding: contentEncoding))
        var out: [UInt8] = []
        var offers = 0, refusals = 0
        var start = 0
        for end in cuts + [raw.count] where end > start {
            var outcome = ContentDecoder.Outcome.refused
            var tries = 0
            while outcome == .refused, tries < 10_000 {
                tries += 1
                outcome = raw[start..<end].withUnsafeBytes { piece in
                    d.decode(piece) { bytes in
                        #expect(bytes.count > 0, "the sink is never offered nothing")
                        offers += 1
                        if refuseEvery > 0, offers % refuseEvery == 0 {
                            refusals += 1
                            return false
                        }
                        out.append(contentsOf: bytes)
                        return true
                    }
                }
            }
            if case .failed = outcome { return (out, outcome, d.unfinished, refusals) }
            start = end
        }
        return (out, .taken, d.unfinished, refusals)
    }

    static func raw(_ name: String) -> [UInt8] { [UInt8](Data(base64Encoded: coded[name]!.base64)!) }

    @Test(arguments: names) func wholeBodyDecodes(name: String) throws {
        let r = try Self.run(Self.coded[name]!.contentEncoding, Self.raw(name), cuts: [])
        #expect(r.outcome == .taken)
        #expect(r.out == Self.plain)
        #expect(r.unfinished == nil)
    }

    /// Split in two at every byte, and in single bytes.
    @Test(arguments: names) func everySplitDecodes(name: String) throws {
        let raw = Self.raw(name)
        for cut in 0...raw.count {
            let r = try Self.run(Self.coded[name]!.contentEncoding, raw, cuts: [cut])
            #expect(r.out == Self.plain && r.unfinished == nil, "cut at \(cut)")
        }
        let bytes = try Self.run(Self.coded[name]!.contentEncoding, raw, cuts: Array(1..<raw.count))
        #expect(bytes.out == Self.plain && bytes.unfinished == nil)
    }

    /// Cut at every length short of the whole: never a complete body.
    @Test(arguments: names) func everyTruncationIsUnfinished(name: String) throws {
        let raw = Self.raw(name)
        let coding = Self.coded[name]!.contentEncoding
        for length in 1..<raw.count {
            let r = try Self.run(coding, Array(raw[..<length]), cuts: [])
            let failed = if case .failed = r.outcome { true } else { false }
            #expect(failed || r.unfinished != nil, "\(length) of \(raw.count) bytes looked whole")
        }
    }

    /// Two gzip members (`gzip("hello ") + gzip("world")`, RFC 1952 §2.2: a gzip file
    /// is a series of members): both decode, however the body is split; cut inside the
    /// second it is unfinished. Only the first member came through before (the attack
    /// tester's F3).
    @Test func gzipMembersDecodeOneAfterAnother() throws {
        let raw = [UInt8](Data(base64Encoded: "H4sIAAAAAAACA8tIzcnJVwAA9vmB7QYAAAAfiwgAAAAAAAIDK88vykkBAEMRdzoFAAAA")!)
        let whole = Array("hello world".utf8)
        for cut in 0...raw.count {
            let r = try Self.run("gzip", raw, cuts: [cut])
            #expect(r.out == whole && r.unfinished == nil, "cut at \(cut)")
        }
        let bytes = try Self.run("gzip", raw, cuts: Array(1..<raw.count))
        #expect(bytes.out == whole && bytes.unfinished == nil)
        for length in 27..<raw.count {  // the first member is bytes 0..<26
            let r = try Self.run("gzip", Array(raw[..<length]), cuts: [])
            let failed = if case .failed = r.outcome { true } else { false }
            #expect(failed || r.unfinished != nil, "\(length) of \(raw.count) bytes looked whole")
        }
        // Bytes after the last member that start no other are ignored, as gzip(1) does.
        let trailing = try Self.run("gzip", Array(raw[..<26]) + Array("garbage".utf8), cuts: [26])
        #expect(trailing.out == Array("hello ".utf8) && trailing.unfinished == nil)
    }

    /// A gzip body whose decoded length is a whole number of output buffers: its
    /// member ends with the buffer full and nothing after it. The decoder spun for ever
    /// there once (the soak found it: `/gzip/65536` hung the daemon's loop).
    @Test func gzipEndingOnAFullOutputBufferEnds() throws {
        let plain = [UInt8](repeating: UInt8(ascii: "x"), count: 4 * ContentDecoder.Stage.bufferSize)
        let raw = try #require(try Self.gzip(plain))
        for cuts in [[], [raw.count - 1], Array(1..<raw.count).filter { $0 % 7 == 0 }] {
            let r = try Self.run("gzip", raw, cuts: cuts)
            #expect(r.outcome == .taken && r.out == plain && r.unfinished == nil)
        }
    }

    /// `bytes` gzip-compressed by the system's gzip(1).
    static func gzip(_ bytes: [UInt8]) throws -> [UInt8]? {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/gzip")
        p.arguments = ["-c", "-n"]
        let input = Pipe(), output = Pipe()
        p.standardInput = input
        p.standardOutput = output
        try p.run()
        input.fileHandleForWriting.write(Data(bytes))
        try input.fileHandleForWriting.close()
        let out = output.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return p.terminationStatus == 0 ? [UInt8](out) : nil
    }

    /// The exact text of a truncation, naming the coding.
    @Test func truncationSaysWhichStream() throws {
        let raw = Self.raw("gzip")
        let r = try Self.run("gzip", Array(raw[..<20]), cuts: [])
        #expect(r.unfinished == "Truncated gzip body: the response ended before its gzip stream did")
    }

    /// Refusals at every second offer, with pieces of 7 bytes: the output is still exact
    /// and in order.
    @Test(arguments: names) func refusedBytesComeAgain(name: String) throws {
        let raw = Self.raw(name)
        let r = try Self.run(Self.coded[name]!.contentEncoding, raw, cuts: Array(stride(from: 7, to: raw.count, by: 7)),
                             refuseEvery: 2)
        #expect(r.refusals > 0)
        #expect(r.out == Self.plain)
        #expect(r.unfinished == nil)
    }

    /// No bytes at all (HEAD, 204, 304 with a Content-Encoding) is a whole body.
    @Test func noBodyIsWhole() throws {
        let d = try #require(ContentDecoder(contentEncoding: "gzip"))
        #expect(d.unfinished == nil)
    }

    @Test func codingNames() throws {
        #expect(try ContentDecoder.codings(of: "identity") == [])
        #expect(try ContentDecoder.codings(of: " GZip ,identity, br") == [.gzip, .brotli])
        #expect(try ContentDecoder.codings(of: "x-gzip") == [.gzip])
        #expect(ContentDecoder(contentEncoding: "identity") == nil)
        #expect(throws: ContentDecoder.DecodingError("Unrecognized content encoding type \"compress\": the engine decodes deflate, gzip, br, zstd")) {
            try ContentDecoder.codings(of: "compress")
        }
        #expect(throws: ContentDecoder.DecodingError.self) { try ContentDecoder.codings(of: "gzip, gzip, gzip, gzip, gzip, gzip") }
    }

    /// A coding the engine does not know fails the first byte, not an empty body.
    @Test func unknownCodingFailsItsFirstByte() throws {
        let d = try #require(ContentDecoder(contentEncoding: "compress"))
        let none = UnsafeRawBufferPointer(start: nil, count: 0)
        #expect(d.decode(none) { _ in true } == .taken)
        let outcome = [UInt8]("x".utf8).withUnsafeBytes { d.decode($0) { _ in true } }
        #expect(outcome == .failed("Unrecognized content encoding type \"compress\": the engine decodes deflate, gzip, br, zstd"))
    }

    /// Bytes that are not the coding they claim fail with zlib's reason.
    @Test func garbageFails() throws {
        let r = try Self.run("gzip", Array("not gzip at all".utf8), cuts: [])
        #expect(r.outcome == .failed("Error while processing content unencoding: incorrect header check"))
    }
}
