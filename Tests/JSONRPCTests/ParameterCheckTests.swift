import JSON
import Testing
@testable import JSONRPC

private func call(_ text: String) -> JSONValue? {
    let out = exchangeWithData(text)
    return out.first
}

private func exchangeWithData(_ text: String) -> [JSONValue] {
    let peer = RecordingPeer()
    let dispatcher = Dispatcher(registry: specificationRegistry())
    for v in parse(text) { dispatcher.dispatch(v, from: peer) }
    return peer.sent
}

@Test func missingRequiredParameterIsInvalidParams() {
    let r = call(#"{"jsonrpc":"2.0","method":"subtract","params":{"minuend":1},"id":7}"#)
    #expect(r?["error"]?["code"] == -32602)
    #expect(r?["error"]?["data"]?["detail"] == "'subtrahend' is required")
    #expect(r?["id"] == 7)
}

@Test func unknownParameterIsInvalidParams() {
    let r = call(#"{"jsonrpc":"2.0","method":"subtract","params":{"minuend":1,"subtrahend":2,"extra":3},"id":1}"#)
    #expect(r?["error"]?["code"] == -32602)
    #expect(r?["error"]?["data"]?["detail"]?.stringValue?.hasPrefix("unknown parameter 'extra'") == true)
}

@Test func tooManyPositionalParametersIsInvalidParams() {
    let r = call(#"{"jsonrpc":"2.0","method":"subtract","params":[1,2,3],"id":1}"#)
    #expect(r?["error"]?["code"] == -32602)
}

@Test func wrongTypeIsInvalidParams() {
    let r = call(#"{"jsonrpc":"2.0","method":"subtract","params":["a",2],"id":1}"#)
    #expect(r?["error"]?["code"] == -32602)
    #expect(r?["error"]?["data"]?["detail"] == "'minuend' must be an integer")
}

@Test func notificationWithBadParametersIsSilent() {
    #expect(exchangeWithData(#"{"jsonrpc":"2.0","method":"subtract","params":{}}"#).isEmpty)
}

@Test func idOfWrongTypeIsInvalidRequestWithNullID() {
    let r = call(#"{"jsonrpc":"2.0","method":"get_data","id":{"x":1}}"#)
    #expect(r == ["jsonrpc": "2.0", "error": ["code": -32600, "message": "Invalid Request",
                                               "data": ["detail": "'id' must be a string, a number or null"]], "id": nil])
}

@Test func nullIDIsARequestNotANotification() {
    #expect(call(#"{"jsonrpc":"2.0","method":"get_data","id":null}"#) == ["jsonrpc": "2.0", "result": ["hello", 5], "id": nil])
}

@Test func wrongVersionIsInvalidRequestWithItsID() {
    let r = call(#"{"jsonrpc":"1.0","method":"get_data","id":3}"#)
    #expect(r?["error"]?["code"] == -32600)
    #expect(r?["id"] == 3)
}

@Test func deferredCallInBatchHoldsTheArray() {
    let registry = specificationRegistry()
    var kept: RPCCall?
    registry.register("later", params: []) { c in
        kept = c
        return .deferred
    }
    let peer = RecordingPeer()
    let d = Dispatcher(registry: registry)
    for v in parse(#"[{"jsonrpc":"2.0","method":"later","id":1},{"jsonrpc":"2.0","method":"get_data","id":2}]"#) {
        d.dispatch(v, from: peer)
    }
    #expect(peer.sent.isEmpty)
    #expect(peer.deferred == 1)
    kept?.reply("now")
    // A call refers to its method (`registered`), whose handler holds `kept`: let go,
    // as a server lets go of an answered call.
    kept = nil
    #expect(peer.deferred == 0)
    #expect(peer.sent == [[["jsonrpc": "2.0", "result": ["hello", 5], "id": 2], ["jsonrpc": "2.0", "result": "now", "id": 1]]])
}

@Test func callsRunInArrivalOrder() {
    let registry = MethodRegistry()
    var order: [Int64] = []
    registry.register("step", params: ["n"]) { c in
        order.append(try c.params.int("n"))
        return .result(true)
    }
    let peer = RecordingPeer()
    let d = Dispatcher(registry: registry)
    let text = (1...5).map { #"{"jsonrpc":"2.0","method":"step","params":[\#($0)],"id":\#($0)}"# }.joined(separator: "\n")
        + #"[{"jsonrpc":"2.0","method":"step","params":[6]},{"jsonrpc":"2.0","method":"step","params":[7],"id":7}]"#
    for v in parse(text) { d.dispatch(v, from: peer) }
    #expect(order == [1, 2, 3, 4, 5, 6, 7])
}
