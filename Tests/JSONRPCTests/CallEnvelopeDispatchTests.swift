import JSON
import Testing
@testable import JSONRPC

/// Records every message as the bytes a connection would write.
private final class BytesPeer: RPCPeer {
    var sent: [[UInt8]] = []
    var isOpen = true
    var context: AnyObject?
    func send(_ message: JSONValue) { sent.append(JSON.encode(message)) }
    func send(encoded message: EncodedJSON) { sent.append(message.bytes) }
    func admits(replyBytes bytes: Int) -> Bool { isOpen }
    func deferredCallStarted() {}
    func deferredCallEnded() {}
}

/// A call envelope picked by the decoder (`JSONStreamEvent.call`) is answered with the
/// same bytes, in the same order, as the object it came from.
@Suite struct CallEnvelopeDispatchTests {
    /// What `text` is answered with, through a decoder that picks envelopes or not, and
    /// how many calls came picked.
    private func replies(_ text: String, picking: Bool) -> (bytes: [[UInt8]], picked: Int) {
        let peer = BytesPeer()
        let dispatcher = Dispatcher(registry: specificationRegistry())
        let decoder = JSONStreamDecoder(pickCallEnvelopes: picking)
        var picked = 0
        for event in decoder.feed(Array(text.utf8)) + decoder.finish() {
            switch event {
            case .value(let v): dispatcher.dispatch(v, from: peer)
            case .call(let c):
                picked += 1
                dispatcher.dispatch(c, from: peer)
            case .error(let e): dispatcher.parseFailed(e, peer: peer)
            case .tooLarge: Issue.record("unexpected tooLarge")
            }
        }
        return (peer.sent, picked)
    }

    /// Each line, and how many of its values are picked envelopes.
    static let table: [(String, Int)] = [
        (#"{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":1}"#, 1),
        (#"{"jsonrpc":"2.0","method":"subtract","params":{"subtrahend":23,"minuend":42},"id":"a"}"#, 1),
        (#"{"id":2.5,"method":"get_data","jsonrpc":"2.0"}"#, 1),
        (#"{"jsonrpc":"2.0","method":"notify_hello","params":[7]}"#, 1),
        (#"{"jsonrpc":"2.0","method":"get_data","id":null}"#, 1),
        (#"{"method":"get_data","id":1}"#, 1),
        (#"{"jsonrpc":"1.0","method":"get_data","id":1}"#, 1),
        (#"{"jsonrpc":2.0,"method":"get_data","id":1}"#, 1),
        (#"{"jsonrpc":"2.0","method":1,"id":1}"#, 1),
        (#"{"jsonrpc":"2.0","id":1}"#, 1),
        (#"{"jsonrpc":"2.0","method":"get_data","id":[1]}"#, 1),
        (#"{"jsonrpc":"2.0","method":"get_data","id":{"a":1}}"#, 1),
        (#"{"jsonrpc":"2.0","method":"get_data","id":true}"#, 1),
        (#"{"jsonrpc":"2.0","method":"get_data","params":"x","id":1}"#, 1),
        (#"{"jsonrpc":"2.0","method":"get_data","params":null,"id":1}"#, 1),
        (#"{"jsonrpc":"2.0","method":"nope","id":1}"#, 1),
        (#"{"jsonrpc":"2.0","method":"subtract","params":{"minuend":1},"id":9}"#, 1),
        (#"{"jsonrpc":"2.0","method":"subtract","params":[1,2,3],"id":9}"#, 1),
        (#"{"jsonrpc":"2.0","method":"notify_hello","params":"bad"}"#, 1),
        (#"{}"#, 1),
        (#"{"jsonrpc":"2.0","method":"get_data","id":1,"extra":0}"#, 0),
        (#"{"jsonrpc":"2.0","method":"nope","method":"get_data","id":1}"#, 0),
        (#"{"jsonrpc":"2.0","method":"get_data","id":1,"id":"two"}"#, 0),
        (#"{"jsonrpc":"2.0","result":1,"id":1}"#, 0),
        (#"{"jsonrpc":"2.0","error":{"code":1},"id":1}"#, 0),
        (#"{"result":1,"error":2,"id":1}"#, 0),
        (#"[{"jsonrpc":"2.0","method":"get_data","id":1},{"jsonrpc":"2.0","method":1,"id":2},3]"#, 0),
        (#"[]"#, 0),
        (#"[1]"#, 0),
        (#"17"#, 0),
        (#""jsonrpc""#, 0),
        (#"{"jsonrpc":"2.0","method":"get_data","id":1"#, 0),
        (#"{"jsonrpc":"2.0","method":"get_data","id":1}{"id":2,"jsonrpc":"2.0","method":"subtract","params":[3,1]}"#, 2),
    ]

    @Test func pickedEnvelopesAreAnsweredAsTheirObjects() {
        for (text, calls) in Self.table {
            let plain = replies(text, picking: false)
            let fast = replies(text, picking: true)
            #expect(plain.picked == 0)
            #expect(fast.picked == calls, "\(text)")
            #expect(fast.bytes.map { String(decoding: $0, as: UTF8.self) } == plain.bytes.map { String(decoding: $0, as: UTF8.self) },
                    "\(text)")
        }
        // The whole table as one stream: the same replies in the same order.
        let stream = Self.table.map(\.0).joined(separator: "\n")
        #expect(replies(stream, picking: true).bytes == replies(stream, picking: false).bytes)
    }
}
