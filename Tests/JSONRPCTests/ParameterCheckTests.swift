import JSON
import Testing
@testable import JSONRPC

private func call(_ text: String) -> JSONValue? {
    let out = exchangeWithData(text)
    return out.first
}

private func exchangeWithData(_ text: String, dispatcher: Dispatcher = Dispatcher(registry: specificationRegistry())) -> [JSONValue] {
    let peer = RecordingPeer()
    for v in parse(text) { dispatcher.dispatch(v, from: peer) }
    return peer.sent
}

private func utf8(_ s: String) -> [UInt8] { Array(s.utf8) }

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

/// Issue 41: ids are echoed as sent, integers past 2^53 and 2^63 as their digits (a
/// double rounded them); a number no double holds is no id, refused before the call runs.
@Test func idsAreEchoedAsSent() {
    let peer = RecordingPeer()
    let registry = specificationRegistry()
    var ran = 0
    registry.register("count", params: []) { _ in
        ran += 1
        return .result(.int(Int64(ran)))
    }
    let dispatcher = Dispatcher(registry: registry)
    let ids = ["9007199254740993", "9223372036854775807", "9223372036854775808", "18446744073709551616",
               "-9223372036854775809", "123456789012345678901234567890", "0.5", "\"x\""]
    for id in ids {
        for v in parse(#"{"jsonrpc":"2.0","method":"count","id":"# + id + "}") { dispatcher.dispatch(v, from: peer) }
        // The same with the envelope picked out by the decoder, and in a batch.
        let decoder = JSONStreamDecoder(pickCallEnvelopes: true)
        for event in decoder.feed(utf8(#"{"jsonrpc":"2.0","method":"count","id":"# + id + "}\n")) {
            guard case .call(let envelope) = event else { Issue.record("not picked: \(event)"); continue }
            dispatcher.dispatch(envelope, from: peer)
        }
        for v in parse(#"[{"jsonrpc":"2.0","method":"count","id":"# + id + "}]") { dispatcher.dispatch(v, from: peer) }
    }
    let written = peer.sent.map(JSON.encodeString)
    var expected: [String] = []
    for (i, id) in ids.enumerated() {
        expected += [#"{"jsonrpc":"2.0","result":\#(3 * i + 1),"id":\#(id)}"#, #"{"jsonrpc":"2.0","result":\#(3 * i + 2),"id":\#(id)}"#,
                     #"[{"jsonrpc":"2.0","result":\#(3 * i + 3),"id":\#(id)}]"#]
    }
    #expect(written == expected)

    let before = ran
    for id in ["1e400", "-1e400", "1E999"] {
        for text in [#"{"jsonrpc":"2.0","method":"count","id":"# + id + "}", #"[{"jsonrpc":"2.0","method":"count","id":"# + id + "}]"] {
            let out = exchangeWithData(text, dispatcher: dispatcher)
            let refusal: JSONValue = ["jsonrpc": "2.0", "error": ["code": -32600, "message": "Invalid Request",
                "data": ["detail": "'id' is a number out of a double's range: use a string, an integer or a smaller number"]], "id": nil]
            #expect(out == [text.hasPrefix("[") ? [refusal] : refusal], "\(text)")
        }
    }
    #expect(ran == before, "a call with an id of 1e400 ran")
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
