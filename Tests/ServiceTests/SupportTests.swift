import Testing
import JSONRPC
@testable import Service

@Test func utf8CutHoldsBackASplitCharacter() {
    let euro: [UInt8] = [0xE2, 0x82, 0xAC]
    #expect(UTF8Cut.validPrefix(ArraySlice([0x61] + euro), allowIncompleteTail: false) == .valid(4))
    #expect(UTF8Cut.validPrefix(ArraySlice([0x61] + euro.prefix(2)), allowIncompleteTail: true) == .valid(1))
    #expect(UTF8Cut.validPrefix(ArraySlice([0x61] + euro.prefix(2)), allowIncompleteTail: false) == .invalid(1))
    #expect(UTF8Cut.validPrefix([0x61, 0xFF, 0x61], allowIncompleteTail: true) == .invalid(1))
    #expect(UTF8Cut.validPrefix([0xED, 0xA0, 0x80], allowIncompleteTail: true) == .invalid(0))  // a surrogate
    #expect(UTF8Cut.validPrefix([0xF0, 0x9F, 0x98, 0x80], allowIncompleteTail: false) == .valid(4))
}

/// ASCII is skipped 32 and then eight bytes at a time: what follows a run of any
/// length (past two 32-byte blocks), in a slice that starts anywhere, is still judged
/// byte by byte.
@Test func utf8CutAfterASCIIRunsOfEveryLength() {
    let euro: [UInt8] = [0xE2, 0x82, 0xAC]
    for length in 0..<80 {
        let ascii = [UInt8](repeating: 0x61, count: length)
        for offset in 0..<3 {
            let pad = [UInt8](repeating: 0x62, count: offset)
            func cut(_ tail: [UInt8], _ incomplete: Bool) -> UTF8Cut.Outcome {
                let all = pad + ascii + tail
                return UTF8Cut.validPrefix(all[offset...], allowIncompleteTail: incomplete)
            }
            #expect(cut([], false) == .valid(length))
            #expect(cut(euro + ascii, false) == .valid(2 * length + 3))
            #expect(cut([0xFF] + ascii, true) == .invalid(length))
            #expect(cut(Array(euro.prefix(2)), true) == .valid(length))
            #expect(cut(Array(euro.prefix(2)), false) == .invalid(length))
        }
    }
}

@Test func formEncodingMatchesBrowsers() {
    #expect(FormEncoding.encode([("a b", "c&d=é"), ("x", "")]) == "a+b=c%26d%3D%C3%A9&x=")
}

@Test func byteQueueNeverReturnsAByteTwice() {
    var q = ByteQueue()
    var out: [UInt8] = []
    var next: UInt8 = 0
    for round in 0..<200 {
        let chunk = (0..<(round % 17 + 1)).map { _ -> UInt8 in defer { next &+= 1 }; return next }
        chunk.withUnsafeBytes { q.append($0) }
        let take = (round * 7) % 13
        out += q.peek(take)
        q.consume(take)
    }
    out += q.peek(q.count)
    q.consume(q.count)
    #expect(out == (0..<out.count).map { UInt8(truncatingIfNeeded: $0) })
    #expect(q.isEmpty)
}

/// Emptied, a queue keeps a large buffer only when told it fills again at once (its
/// producer waits for room); a small one it always keeps.
@Test func byteQueueKeepsALargeBufferOnlyWhileRefilled() {
    let large = [UInt8](repeating: 7, count: 2 << 20), small = [UInt8](repeating: 7, count: 1000)
    var q = ByteQueue()
    large.withUnsafeBytes { q.append($0) }
    q.consume(q.count, keepingMemory: true)
    #expect(q.isEmpty && q.capacity >= large.count)
    large.withUnsafeBytes { q.append($0) }
    q.consume(q.count)
    #expect(q.isEmpty && q.capacity == 0)
    small.withUnsafeBytes { q.append($0) }
    q.consume(q.count)
    #expect(q.isEmpty && q.capacity >= small.count)
}

@Test func listenAddressesParse() throws {
    #expect(try ListenAddress.parse("unix:/tmp/x.sock") == .unix(path: "/tmp/x.sock"))
    #expect(try ListenAddress.parse("tcp:127.0.0.1:0") == .tcp(host: "127.0.0.1", port: 0))
    #expect(try ListenAddress.parse("tcp:[::1]:8080") == .tcp(host: "::1", port: 8080))
    #expect(try ListenAddress.parse("tls:127.0.0.1:0") == .tls(host: "127.0.0.1", port: 0))
    #expect(try ListenAddress.parse("tls:[::1]:8443") == .tls(host: "::1", port: 8443))
    #expect(ListenAddress.tls(host: "::1", port: 8443).description == "tls:[::1]:8443")
    #expect(throws: ListenAddress.ParseError.self) { try ListenAddress.parse("tls:[::1]") }
    #expect(throws: ListenAddress.ParseError.self) { try ListenAddress.parse("tls::443") }
    #expect(throws: ListenAddress.ParseError.self) { try ListenAddress.parse("tcp:host") }
    #expect(throws: ListenAddress.ParseError.self) { try ListenAddress.parse("udp:1") }
}

@Test func urlShapeChecks() throws {
    for good in ["http://a", "HTTPS://example.com:8443/x?y#z", "http://u:p@[::1]:80/", "http://127.0.0.1:1"] {
        #expect(throws: Never.self) { try HTTPSyntax.checkURL(good) }
    }
    for bad in ["ftp://a/", "file:///etc/passwd", "http:///x", "http://a:b/", "http://[::1/", "/relative", "http://a b/",
                "gopher://x", "http://a:123456/"] {
        #expect(throws: RPCError.self, "\(bad)") { try HTTPSyntax.checkURL(bad) }
    }
}
