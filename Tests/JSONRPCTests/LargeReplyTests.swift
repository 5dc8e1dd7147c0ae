import JSON
@testable import JSONRPC
import Testing

/// A reply of `RPCConnection.directWriteBytes` or more goes to the stream from its own
/// memory instead of through the out-queue; it keeps its place among the replies queued
/// before and after it, arrives whole, and is counted in `bytesOut` like the others.
@Suite struct LargeReplyTests {
    @Test func largeRepliesKeepTheirPlaceAmongSmallOnes() throws {
        let p = try ConnectionPeer(connections: 1)
        let large = RPCConnection.directWriteBytes
        // 0: a tick; otherwise a text call for that many bytes, some above the bound,
        // one just under it, and one large reply first of all.
        let sizes = [3 * large, 0, large, 0, 0, large - 100, 2 * large + 7, 0]
        var calls: [UInt8] = []
        for (id, n) in sizes.enumerated() { calls += n == 0 ? ConnectionPeer.tick(id) : ConnectionPeer.text(id, bytes: n) }
        p.write(calls, on: 0)
        let got = p.receive(sizes.count, on: 0)
        #expect(!got.closed)
        #expect(got.replies.map { $0["id"]?.int64Value } == sizes.indices.map { Int64($0) })
        for (reply, n) in zip(got.replies, sizes) where n > 0 {
            let text = reply["result"]?["text"]?.stringValue ?? ""
            #expect(text.utf8.count == n && text.utf8.allSatisfy { $0 == UInt8(ascii: "x") }, "\(n) bytes")
        }
        #expect(p.connections[0].bytesOut == UInt64(got.bytes))
        try p.close()
    }

    /// The out-queue's limit counts each byte once: replies flushed together that the
    /// socket did not take whole are queued in the stream, not also still in the
    /// connection's buffer. 600 KB of replies under a 700 KB limit all arrive; counted
    /// twice (the stream's part and the whole again) they passed it and the connection
    /// was closed.
    @Test func theOutQueueLimitCountsEachByteOnce() throws {
        var limits = ConnectionLimits()
        limits.maxOutboundBytes = 700_000
        let p = try ConnectionPeer(connections: 1, limits: limits)
        let count = 12, size = 50_000  // each below directWriteBytes: queued, then flushed together
        p.write((0..<count).flatMap { ConnectionPeer.text($0, bytes: size) }, on: 0)
        let got = p.receive(count, on: 0)
        #expect(!got.closed)
        #expect(got.replies.count == count)
        try p.close()
    }
}
