import JSON
import Testing
@testable import JSONRPC

/// Responses are written one after another in memory the dispatcher keeps
/// (`ResponseBuffer`); a response a peer holds on to must still read as itself after
/// later calls have been answered.
struct ResponseBufferTests {
    /// Keeps every response as it was handed over, bytes and all.
    final class KeepingPeer: RPCPeer {
        var kept: [EncodedJSON] = []
        var isOpen = true
        var context: AnyObject?
        func send(_ message: JSONValue) { kept.append(EncodedJSON(message)) }
        func send(encoded message: EncodedJSON) { kept.append(message) }
        func admits(replyBytes bytes: Int) -> Bool { isOpen }
        func deferredCallStarted() {}
        func deferredCallEnded() {}
    }

    @Test func keptResponsesAreNotOverwrittenByLaterOnes() {
        let registry = MethodRegistry()
        registry.register("echo", params: ["text"]) { call in .result(.string(try call.params.string("text"))) }
        registry.register("info", params: []) { call in
            call.reply(object: { $0.add("n", int: 7) })
            return .answered
        }
        let dispatcher = Dispatcher(registry: registry)
        let peer = KeepingPeer()
        let calls: [JSONValue] = [
            ["jsonrpc": "2.0", "id": 1, "method": "echo", "params": ["text": "first, a longer text"]],
            ["jsonrpc": "2.0", "id": 2, "method": "info"],
            ["jsonrpc": "2.0", "id": 3, "method": "echo", "params": ["text": "x"]],
            ["jsonrpc": "2.0", "id": 4, "method": "missing"],
            ["jsonrpc": "2.0", "id": 5, "method": "echo", "params": ["text": .string(String(repeating: "y", count: 20_000))]],
            ["jsonrpc": "2.0", "id": 6, "method": "info"],
        ]
        for call in calls { dispatcher.dispatch(call, from: peer) }
        let texts = peer.kept.map { String(decoding: $0.bytes, as: UTF8.self) }
        #expect(texts.count == 6)
        guard texts.count == 6 else { return }
        #expect(texts[0] == #"{"jsonrpc":"2.0","result":"first, a longer text","id":1}"#)
        #expect(texts[1] == #"{"jsonrpc":"2.0","result":{"n":7},"id":2}"#)
        #expect(texts[2] == #"{"jsonrpc":"2.0","result":"x","id":3}"#)
        #expect(texts[3].hasPrefix(#"{"jsonrpc":"2.0","error":{"code":-32601,"#) && texts[3].hasSuffix(#","id":4}"#))
        #expect(texts[4] == #"{"jsonrpc":"2.0","result":""# + String(repeating: "y", count: 20_000) + #"","id":5}"#)
        #expect(texts[5] == #"{"jsonrpc":"2.0","result":{"n":7},"id":6}"#)
    }

    /// A call answered after its peer has gone is answered (once, observers told, the
    /// batch it belongs to completed) without its response being written: the result's
    /// writer does not run, and nothing reaches the peer.
    @Test func aReplyToAPeerThatHasGoneIsNotWritten() {
        let registry = MethodRegistry()
        var held: [RPCCall] = []
        registry.register("later", params: []) { call in
            held.append(call)
            return .deferred
        }
        let dispatcher = Dispatcher(registry: registry)
        var answered: [Int64] = []
        dispatcher.onAnswer = { call, _ in answered.append(call.id?.int64Value ?? -1) }
        let peer = KeepingPeer()
        dispatcher.dispatch(["jsonrpc": "2.0", "id": 1, "method": "later"], from: peer)
        dispatcher.dispatch([["jsonrpc": "2.0", "id": 2, "method": "later"], ["jsonrpc": "2.0", "id": 3, "method": "later"]],
                            from: peer)
        #expect(held.count == 3)
        peer.isOpen = false
        var written = 0
        for call in held { call.reply(object: { _ in written += 1 }) }
        #expect(written == 0)
        #expect(held.filter { !$0.isAnswered }.isEmpty)
        #expect(answered == [1, 2, 3])
        #expect(peer.kept.isEmpty)
        held = []  // the calls hold their method, whose handler holds them
    }
}
