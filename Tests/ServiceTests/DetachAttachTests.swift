import Foundation
import JSON
import Testing
@testable import Service
import TestSupport

/// `detach` and `attach`: requests survive their connection's close, keep transferring,
/// and another connection of the principal reads on at the byte where the first one
/// stopped. Tokens work once, before `--detach-ttl`, and a bad one says nothing more
/// than `unknown_handle`.
@Suite(.serialized) struct DetachAttachTests {
    private func handles(_ v: JSONValue?) -> [String] { v?.arrayValue?.compactMap(\.stringValue) ?? [] }

    @Test func readingContinuesByteExactOnAnotherConnection() throws {
        let n = 600_000
        try withServer({ config in config.maxBufferBytes = 65536 }) { server, up in
            var first: TestClient? = try server.connect()
            let r = try first!.start(up.base + "/bytes/\(n)", name: "big")
            let head = try first!.readBodyPart(r, atLeast: 10_000)
            let d = try first!.call("detach")
            #expect(handles(d["requests"]) == [r])
            #expect(d["expiresInSeconds"] == 60)
            let token = try #require(d["token"]?.stringValue)
            #expect(token.hasPrefix("att_") && token.utf8.count == 4 + 32)
            first = nil  // closes the connection: the detached request stays

            let second = try server.connect()
            try second.waitForConnections(1)
            #expect(handles(try second.call("attach", ["token": .string(token)])["requests"]) == [r])
            let rest = try second.readBody(r)
            #expect(head.count + rest.count == n)
            #expect(head + rest == FixturePattern.bytes(count: n))
            // The token is used up.
            #expect(try second.failureReason("attach", ["token": .string(token)]) == "unknown_handle")
        }
    }

    @Test func aTransferKeepsRunningWhileDetachedAndTheAttacherHearsOfIt() throws {
        try withServer { server, up in
            let watcher = try server.connect()
            try watcher.call("subscribe", ["all": true, "events": ["stateChange"]])
            var first: TestClient? = try server.connect()
            let r = try first!.start(up.base + "/drip/4000?chunk=500&delay=20", name: "drip")
            let token = try #require(try first!.call("detach")["token"]?.stringValue)
            first = nil
            // Nobody holds the request now; its transfer ends all the same.
            #expect(try watcher.statesUntilDone(r) == ["OPENED", "SENT", "HEADERS_RECEIVED", "LOADING", "DONE"])
            let second = try server.connect()
            #expect(handles(try second.call("attach", ["token": .string(token)])["requests"]) == [r])
            #expect(try second.readBody(r) == FixturePattern.bytes(count: 4000))
            // The attacher is the opener now: it hears the next transitions.
            try second.call("open", ["request": .string(r), "method": "GET", "url": .string(up.base + "/bytes/3")])
            try second.call("send", ["request": .string(r)])
            #expect(try second.statesUntilDone(r) == ["OPENED", "SENT", "HEADERS_RECEIVED", "LOADING", "DONE"])
        }
    }

    @Test func onlyTheRequestsCreatedBeforeDetachAreDetached() throws {
        try withServer { server, _ in
            var first: TestClient? = try server.connect()
            try first!.call("create", ["request": "early"])
            let token = try #require(try first!.call("detach")["token"]?.stringValue)
            try first!.call("create", ["request": "late"])
            let empty = try first!.call("detach")
            #expect(handles(empty["requests"]) == ["late"])
            let emptyToken = try #require(empty["token"]?.stringValue)
            let none = try first!.call("detach")
            #expect(handles(none["requests"]) == [])
            first = nil
            let second = try server.connect()
            #expect(handles(try second.call("attach", ["token": .string(token)])["requests"]) == ["early"])
            #expect(handles(try second.call("attach", ["token": .string(emptyToken)])["requests"]) == ["late"])
            #expect(try second.listedHandles() == ["early", "late"])
            #expect(handles(try second.call("attach", ["token": none["token"] ?? nil])["requests"]) == [])
        }
    }

    @Test func aRequestCreatedAfterDetachEndsWithItsConnection() throws {
        try withServer { server, _ in
            var first: TestClient? = try server.connect()
            try first!.call("create", ["request": "kept"])
            let token = try #require(try first!.call("detach")["token"]?.stringValue)
            try first!.call("create", ["request": "lost"])
            first = nil
            let second = try server.connect()
            try second.waitUntilReleased(["lost"])
            #expect(handles(try second.call("attach", ["token": .string(token)])["requests"]) == ["kept"])
        }
    }

    @Test func wrongExpiredAndUsedTokensAreAllUnknown() throws {
        let time = ManualClock()
        try withServer({ config in
            config.clock = time.clock
            config.detachTTL = 0.4
        }) { server, _ in
            let c = try server.connect()
            #expect(try c.failureReason("attach", ["token": "att_00000000000000000000000000000000"]) == "unknown_handle")
            #expect(try c.failureReason("attach", ["token": ""]) == "unknown_handle")
            try c.call("create", ["request": "old"])
            let token = try #require(try c.call("detach")["token"]?.stringValue)
            #expect(try c.call("attach", ["token": .string(token)])["requests"] == ["old"])
            #expect(try c.failureReason("attach", ["token": .string(token)]) == "unknown_handle")

            // Not attached in time: the token is refused even before the sweep, and the
            // sweep releases the request.
            let late = try #require(try c.call("detach")["token"]?.stringValue)
            time.advance(0.4)
            #expect(try c.failureReason("attach", ["token": .string(late)]) == "unknown_handle")
            try c.waitUntilReleased(["old"])
        }
    }
}

extension TestClient {
    /// Reads at least `atLeast` bytes of a request's body (fewer only if it ends first).
    func readBodyPart(_ request: String, atLeast: Int, timeout: Double = 30) throws -> [UInt8] {
        var body: [UInt8] = []
        let deadline = Date().addingTimeInterval(timeout)
        while body.count < atLeast {
            guard Date() < deadline else { throw Timeout() }
            let r = try call("getReceiveBuffer", ["request": .string(request), "maxBytes": .int(Int64(atLeast - body.count))])
            if let d = Data(base64Encoded: r["data"]?.stringValue ?? "") { body += d }
            if r["done"] == true { break }
            if r["bytes"] == 0 { usleep(2000) }
        }
        return body
    }
}
