#if canImport(Glibc)
import Glibc
#endif
import JSON
@testable import JSONRPC
import Testing

/// A connection parses a large read a piece at a time, over several loop turns
/// (`RPCConnection.pieceLength`), and its client sees exactly what it would if the
/// read were parsed at once: every reply in order, parse errors at their stream
/// offsets, `messageTooLarge` where the message is, and every call of a read that ends
/// the input answered before the connection closes.
@Suite struct ReadPieceTests {
    private static let bound = RPCConnection.pieceBytes

    private func length(_ text: String) -> Int {
        Array(text.utf8).withUnsafeBytes { RPCConnection.pieceLength($0) }
    }

    @Test func aPieceEndsAfterTheFirstNewlineFromTheBound() {
        let line = String(repeating: "x", count: Self.bound - 1) + "\n"
        #expect(length("") == 0)
        #expect(length("ab\ncd") == 5, "within the bound: all")
        #expect(length(String(repeating: "x", count: Self.bound)) == Self.bound)
        #expect(length(line + "y\n") == Self.bound, "the newline is the bound's last byte")
        #expect(length(line + line) == Self.bound)
        #expect(length("a\n" + String(repeating: "x", count: Self.bound) + "\nb") == Self.bound + 3,
                "a newline before the bound's last byte does not end the piece")
        #expect(length(String(repeating: "x", count: 3 * Self.bound)) == 3 * Self.bound, "no newline: all")
        #expect(length(String(repeating: "x", count: 3 * Self.bound) + "\n\n") == 3 * Self.bound + 1)
        let first = RPCConnection.firstPieceBytes
        let text = String(repeating: "y", count: first) + "\n" + line
        #expect(Array(text.utf8).withUnsafeBytes { RPCConnection.pieceLength($0, bound: first) } == first + 1,
                "a read's first piece has a bound of its own")
    }

    /// What the client should get for `stream`: the replies to what one decoder makes
    /// of all of it at once, as "ok ID", "parse OFFSET" or "too large".
    private func expected(_ stream: [UInt8], maxMessageBytes: Int) -> [String] {
        let decoder = JSONStreamDecoder(maxValueBytes: maxMessageBytes)
        var out: [String] = []
        for event in decoder.feed(stream) + decoder.finish() {
            switch event {
            case .value(let v): out.append("ok \(v["id"]?.int64Value ?? -1)")
            case .call(let c): out.append("ok \(c.id?.int64Value ?? -1)")
            case .error(let e): out.append("parse \(e.offset)")
            case .tooLarge: out.append("too large")
            }
        }
        return out
    }

    private func summary(_ reply: JSONValue) -> String {
        switch reply["error"]?["code"]?.int64Value {
        case nil: "ok \(reply["id"]?.int64Value ?? -1)"
        case -32700: "parse \(reply["error"]?["data"]?["offset"]?.int64Value ?? -1)"
        case -32009: "too large"
        case let code?: "error \(code)"
        }
    }

    @Test func aLargeReadIsParsedAPieceAtATime() throws {
        let p = try ConnectionPeer(connections: 1)
        let total = 20 * CallAllowance.perTurn
        p.send(total, on: 0)
        p.loop.runNoWait()
        let firstTurn = p.ran.ids[0].count
        #expect(firstTurn >= 1)
        #expect(p.connections[0].unparsedByteCount > 0, "the whole read was parsed in its first turn")
        let got = p.receive(total, on: 0)
        #expect(got.replies.map(summary) == (0..<total).map { "ok \($0)" })
        #expect(p.connections[0].unparsedByteCount == 0)
        try p.close()
    }

    /// Lines longer than a piece, bad lines and a value split over two lines, in one
    /// read: the same replies, in the same order, as for the read parsed at once.
    @Test func longAndBadLinesGetTheSameRepliesAsAWholeRead() throws {
        let p = try ConnectionPeer(connections: 1)
        var stream: [UInt8] = []
        for id in 0..<300 {
            switch id % 50 {
            case 7:
                let long = String(repeating: "a", count: Self.bound + id)
                stream += Array("{\"jsonrpc\":\"2.0\",\"id\":\(id),\"method\":\"tick\",\"params\":[\"\(long)\"]}\n".utf8)
            case 13: stream += Array("{\"jsonrpc\":\"2.0\",\"id\":\(id),,}\n".utf8)
            case 21: stream += Array("{\"jsonrpc\":\"2.0\",\n\"id\":\(id),\n\"method\":\"tick\"}\n".utf8)
            default: stream += ConnectionPeer.tick(id)
            }
        }
        let want = expected(stream, maxMessageBytes: ConnectionLimits().maxMessageBytes)
        #expect(want.filter { $0.hasPrefix("parse") }.count == 6)
        p.write(stream, on: 0)
        let got = p.receive(want.count, on: 0)
        #expect(got.replies.map(summary) == want)
        try p.close()
    }

    /// The client ends its input right after a large read: every call is answered, in
    /// order, and then the connection closes.
    @Test func endOfInputAfterALargeReadAnswersEveryCall() throws {
        let p = try ConnectionPeer(connections: 1)
        let total = 20 * CallAllowance.perTurn
        p.send(total, on: 0)
        #expect(shutdown(p.clients[0], Int32(SHUT_WR)) == 0)
        let got = p.receive(total + 1, on: 0)
        #expect(got.replies.map(summary) == (0..<total).map { "ok \($0)" })
        #expect(got.closed)
        try p.close()
    }

    /// A message over the limit in the middle of a large read: the calls before it are
    /// answered, then `messageTooLarge`, and the connection closes without running the
    /// calls after it.
    @Test func aMessageTooLargeInsideALargeReadEndsTheConnectionThere() throws {
        var limits = ConnectionLimits()
        limits.maxMessageBytes = Self.bound / 2
        let p = try ConnectionPeer(connections: 1, limits: limits)
        var stream: [UInt8] = []
        for id in 0..<100 { stream += ConnectionPeer.tick(id) }
        stream += Array("{\"jsonrpc\":\"2.0\",\"id\":100,\"method\":\"tick\",\"params\":[\"".utf8)
        stream += Array(repeating: UInt8(ascii: "b"), count: Self.bound)
        stream += Array("\"]}\n".utf8)
        for id in 101..<150 { stream += ConnectionPeer.tick(id) }
        let want = expected(stream, maxMessageBytes: limits.maxMessageBytes)
        #expect(want == (0..<100).map { "ok \($0)" } + ["too large"])
        p.write(stream, on: 0)
        let got = p.receive(want.count + 1, on: 0)
        #expect(got.replies.map(summary) == want)
        #expect(got.closed)
        #expect(p.ran.ids[0] == (0..<100).map { Int64($0) })
        try p.close()
    }

    /// Another connection's call, sent while the first still works through its large
    /// read, is answered before that read's last reply.
    @Test func anotherConnectionIsAnsweredDuringALargeRead() throws {
        let p = try ConnectionPeer(connections: 2)
        let total = 20 * CallAllowance.perTurn
        p.send(total, on: 0)
        p.loop.runNoWait()
        p.send(1, on: 1)
        let other = p.receive(1, on: 1)
        #expect(other.replies.map(summary) == ["ok 0"])
        #expect(p.ran.ids[0].count < total)
        let got = p.receive(total, on: 0)
        #expect(got.replies.map(summary) == (0..<total).map { "ok \($0)" })
        try p.close()
    }
}
