import JSON
import Testing

/// The decoder's `pickCallEnvelopes`: an object of envelope members only (each once)
/// comes as a `.call` holding the same members the object would; every other value comes
/// as the same `.value` the plain decoder gives, members in the order they were sent.
@Suite struct CallEnvelopeTests {
    private func picked(_ chunks: [[UInt8]]) -> [JSONStreamEvent] {
        let decoder = JSONStreamDecoder(pickCallEnvelopes: true)
        var all: [JSONStreamEvent] = []
        for chunk in chunks { all += decoder.feed(chunk) }
        return all + decoder.finish()
    }

    /// Envelope-only objects: picked, however the stream is cut.
    @Test(arguments: [
        #"{"jsonrpc":"2.0","method":"server.info","id":1}"#,
        #"{"id":"x","params":{"a":[1,{"b":null}],"jsonrpc":"1"},"method":7,"jsonrpc":"2.0"}"#,
        #"{"params":[{"id":1,"id":2}],"method":"m"}"#,
        #"{}"#,
        #"{"json\u0072pc":"2.0","id":null}"#,
        #"{"jsonrpc":"2.0","method":"m","params":"str","id":[1]}"#,
    ])
    func envelopeOnlyObjectsArePicked(_ text: String) throws {
        let plain = events([utf8(text)])
        try #require(plain.count == 1)
        guard case .value(.object(let object)) = plain[0] else {
            Issue.record("not an object: \(plain)")
            return
        }
        for chunks in everySplit(utf8(text)) {
            let got = picked(chunks)
            #expect(got == [.call(JSONCallEnvelope(object))])
            if case .call(let envelope)? = got.first {
                // The same members, no more (`JSONCallEnvelope(_:)` ignores others).
                #expect(envelope.object.count == object.count)
            }
        }
    }

    /// Anything else: exactly the plain decoder's events, members in the order sent.
    @Test(arguments: [
        #"{"jsonrpc":"2.0","method":"m","id":1,"extra":true}"#,
        #"{"id":1,"x":2,"jsonrpc":"2.0","method":"m"}"#,
        #"{"method":"a","params":[],"method":"b","id":3}"#,
        #"{"id":1,"jsonrpc":"2.0","id":2}"#,
        #"{"result":5,"id":1,"jsonrpc":"2.0"}"#,
        #"{"params":{"x":1},"error":{"code":1},"id":"e"}"#,
        #"[{"jsonrpc":"2.0","method":"m","id":1}]"#,
        #"[]"#,
        #""jsonrpc""#,
        #"{"jsonrpc":"2.0","id":1,"method":"m","params":[1],"idx":0}"#,
        #"{"jsonrpc":"2.0","method":"m","id":1,"#,
        #"{"jsonrpc":"2.0","method":"m","id":1, "x": nul}"#,
    ])
    func otherValuesComeAsBefore(_ text: String) {
        for chunks in everySplit(utf8(text)) {
            #expect(picked(chunks) == events(chunks))
        }
    }

    /// The picking starts afresh after an error and in every value of a stream.
    @Test func pickingStartsAfreshAfterAnErrorAndEachValue() {
        let text = "{\"id\":1,\"x\n{\"id\":2}\n{\"id\":3,\"q\":0}\n{\"id\":4}"
        let got = picked([utf8(text)])
        #expect(got.count == 4)
        #expect(got.dropFirst().first == .call(JSONCallEnvelope(id: .int(2))))
        #expect(got.dropFirst(2).first == .value(["id": 3, "q": 0]))
        #expect(got.last == .call(JSONCallEnvelope(id: .int(4))))
    }
}
