import Foundation
import HTTPEngine
import JSON
import Testing
@testable import Service

/// What a client sees of the egress policy: with the server's default policy (no
/// patterns), a request to the loopback upstream ends in DONE with status 0 and a status
/// text beginning `Denied by egress policy`, notified like any other failure — through
/// the object API, synchronous `send`, and `fetch`.
@Suite(.serialized) struct EgressDenialTests {
    static let defaultPolicy: @Sendable (inout ServerConfig) -> Void = { $0.engine.egressPolicy = EgressPolicy() }

    @Test func defaultPolicyDeniesLoopbackAndSaysWhy() throws {
        try withServer(Self.defaultPolicy) { server, up in
            let c = try server.connect()
            let r = try c.start(up.base + "/bytes/10")
            #expect(try c.statesUntilDone(r) == ["OPENED", "SENT", "DONE"])
            let text = "Denied by egress policy: 127.0.0.1 is in the special-purpose range 127.0.0.0/8 (loopback)."
            #expect(try c.call("getStatus", ["request": .string(r)]) == 0)
            #expect(try c.call("getStatusText", ["request": .string(r)]) == .string(text))
            #expect(try c.call("getState", ["request": .string(r)]) == ["state": 5, "stateName": "DONE", "attempt": 1])
            #expect(try c.call("getReceiveBuffer", ["request": .string(r)]) == ["data": "", "encoding": "base64", "bytes": 0, "done": true])
        }
    }

    @Test func synchronousSendAndFetchAreDeniedToo() throws {
        try withServer(Self.defaultPolicy) { server, up in
            let c = try server.connect()
            let url = up.base.replacingOccurrences(of: "127.0.0.1", with: "localhost") + "/bytes/10"
            let summary = try c.call("fetch", ["url": .string(url)])
            #expect(summary["status"] == 0)
            let text = summary["statusText"]?.stringValue ?? ""
            #expect(text.hasPrefix("Denied by egress policy: every address tried for localhost:"), "\(text)")
            try c.call("create", ["request": "s"])
            try c.call("open", ["request": "s", "method": "GET", "url": "http://0x7f.1/", "async": false, "subscribe": false])
            let reply = try c.call("send", ["request": "s"])
            #expect(reply["state"] == 5)
            #expect(reply["status"] == 0)
            #expect(reply["statusText"] == "Denied by egress policy: 0x7f.1 means 127.0.0.1; 127.0.0.1 is in the special-purpose range 127.0.0.0/8 (loopback).")
        }
    }

    /// Another scheme never gets as far as the policy: `open` refuses it.
    @Test func otherSchemesAreInvalidAtOpen() throws {
        try withServer(Self.defaultPolicy) { server, _ in
            let c = try server.connect()
            try c.call("create", ["request": "f"])
            let id = c.send("open", ["request": "f", "method": "GET", "url": "file:///etc/passwd"])
            let reply = try c.response(id)
            #expect(reply["error"]?["code"] == -32602)
        }
    }
}
