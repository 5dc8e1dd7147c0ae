import JSON
import Testing
@testable import JSONRPC

/// Collects what the dispatcher writes, in order.
final class RecordingPeer: RPCPeer {
    var sent: [JSONValue] = []
    var isOpen = true
    var context: AnyObject?
    var deferred = 0
    func send(_ message: JSONValue) { sent.append(message) }
    func admits(replyBytes bytes: Int) -> Bool { isOpen }
    func deferredCallStarted() { deferred += 1 }
    func deferredCallEnded() { deferred -= 1 }
}

/// The methods of the JSON-RPC 2.0 specification's section 7 examples.
func specificationRegistry() -> MethodRegistry {
    let r = MethodRegistry()
    r.register("subtract", params: ["minuend", "subtrahend"]) { call in
        .result(.int(try call.params.int("minuend") - (try call.params.int("subtrahend"))))
    }
    r.registerAnyParams("sum") { call in
        .result(.int((call.rawParams?.arrayValue ?? []).compactMap(\.int64Value).reduce(0, +)))
    }
    r.registerAnyParams("update") { _ in .result(.null) }
    r.registerAnyParams("notify_hello") { _ in .result(.null) }
    r.registerAnyParams("notify_sum") { _ in .result(.null) }
    r.register("get_data", params: []) { _ in .result(["hello", 5]) }
    return r
}

/// Sends `text` through the decoder and the dispatcher; returns what was written, with
/// the server's optional `data` member removed from errors (the specification's
/// examples show none; ours carries details).
func exchange(_ text: String) -> [JSONValue] {
    let peer = RecordingPeer()
    let dispatcher = Dispatcher(registry: specificationRegistry())
    let decoder = JSONStreamDecoder()
    for event in decoder.feed(Array(text.utf8)) + decoder.finish() {
        switch event {
        case .value(let v): dispatcher.dispatch(v, from: peer)
        case .call(let c): dispatcher.dispatch(c, from: peer)
        case .error(let e): dispatcher.parseFailed(e, peer: peer)
        case .tooLarge: Issue.record("unexpected tooLarge")
        }
    }
    return peer.sent.map(withoutErrorData)
}

func withoutErrorData(_ v: JSONValue) -> JSONValue {
    switch v {
    case .array(let items): return .array(items.map(withoutErrorData))
    case .object(var o):
        if case .object(var e)? = o["error"] {
            e["data"] = nil
            o["error"] = .object(e)
        }
        return .object(o)
    default: return v
    }
}

func parse(_ text: String) -> [JSONValue] {
    let d = JSONStreamDecoder()
    return (d.feed(Array(text.utf8)) + d.finish()).compactMap { if case .value(let v) = $0 { v } else { nil } }
}

@Test(arguments: [
    // rpc call with positional parameters
    (#"{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}"#, #"{"jsonrpc": "2.0", "result": 19, "id": 1}"#),
    (#"{"jsonrpc": "2.0", "method": "subtract", "params": [23, 42], "id": 2}"#, #"{"jsonrpc": "2.0", "result": -19, "id": 2}"#),
    // rpc call with named parameters
    (#"{"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23, "minuend": 42}, "id": 3}"#, #"{"jsonrpc": "2.0", "result": 19, "id": 3}"#),
    (#"{"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 42, "subtrahend": 23}, "id": 4}"#, #"{"jsonrpc": "2.0", "result": 19, "id": 4}"#),
    // a Notification
    (#"{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}"#, ""),
    (#"{"jsonrpc": "2.0", "method": "foobar"}"#, ""),
    // rpc call of non-existent method
    (#"{"jsonrpc": "2.0", "method": "foobar", "id": "1"}"#, #"{"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}, "id": "1"}"#),
    // rpc call with invalid JSON
    (#"{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]"#, #"{"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}, "id": null}"#),
    // rpc call with invalid Request object
    (#"{"jsonrpc": "2.0", "method": 1, "params": "bar"}"#, #"{"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null}"#),
    // rpc call Batch, invalid JSON
    (#"[ {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"}, {"jsonrpc": "2.0", "method" ]"#, #"{"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}, "id": null}"#),
    // rpc call with an empty Array
    ("[]", #"{"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null}"#),
    // rpc call with an invalid Batch (but not empty)
    ("[1]", #"[{"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null}]"#),
    // rpc call with invalid Batch
    ("[1,2,3]", #"""
        [{"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null},
         {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null},
         {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null}]
        """#),
    // rpc call Batch
    (#"""
        [
            {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
            {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
            {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},
            {"foo": "boo"},
            {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
            {"jsonrpc": "2.0", "method": "get_data", "id": "9"}
        ]
        """#, #"""
        [
            {"jsonrpc": "2.0", "result": 7, "id": "1"},
            {"jsonrpc": "2.0", "result": 19, "id": "2"},
            {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null},
            {"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}, "id": "5"},
            {"jsonrpc": "2.0", "result": ["hello", 5], "id": "9"}
        ]
        """#),
    // rpc call Batch (all notifications)
    (#"""
        [
            {"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},
            {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}
        ]
        """#, ""),
])
func specificationExample(request: String, expected: String) {
    #expect(exchange(request) == parse(expected))
}

@Test func parseErrorCarriesWhereInData() {
    let peer = RecordingPeer()
    let dispatcher = Dispatcher(registry: specificationRegistry())
    let decoder = JSONStreamDecoder()
    for case .error(let e) in decoder.feed(Array(#"{"a": tru}"#.utf8)) { dispatcher.parseFailed(e, peer: peer) }
    #expect(peer.sent.count == 1)
    #expect(peer.sent.first?["error"]?["data"]?["offset"]?.int64Value != nil)
}
