import Foundation
import JSON
import Testing
import TestSupport

@Suite(.serialized) struct AbortAndFailureTests {
    @Test func abortOutsideATransferReturnsFalse() throws {
        try withServer { server, up in
            let c = try server.connect()
            try c.call("create", ["request": "a"])
            #expect(try c.call("abort", ["request": "a"]) == false)
            try c.call("open", ["request": "a", "method": "GET", "url": .string(up.base + "/bytes/10")])
            #expect(try c.call("abort", ["request": "a"]) == false)
            try c.call("send", ["request": "a"])
            _ = try c.statesUntilDone("a")
            #expect(try c.call("abort", ["request": "a"]) == false)
            #expect(try c.call("getStatus", ["request": "a"]) == 200)
        }
    }

    @Test func abortInSentEndsInDoneWithStatusZero() throws {
        try withServer { server, up in
            let c = try server.connect()
            let r = try c.start(up.base + "/hang")
            _ = try c.waitNotification { $0["params"]?["stateName"] == "SENT" }
            #expect(try c.call("abort", ["request": .string(r)]) == true)
            let done = try c.waitNotification { $0["params"]?["stateName"] == "DONE" }
            #expect(done["params"] == ["request": .string(r), "state": 5, "stateName": "DONE", "status": 0, "statusText": "Aborted", "attempt": 1])
            #expect(try c.call("getStatus", ["request": .string(r)]) == 0)
        }
    }

    @Test func abortInLoadingDiscardsTheBody() throws {
        try withServer { server, up in
            let c = try server.connect()
            let r = try c.start(up.base + "/drip/2000?chunk=100&delay=50")
            _ = try c.waitNotification { $0["params"]?["stateName"] == "LOADING" }
            #expect(try c.call("abort", ["request": .string(r)]) == true)
            let done = try c.waitNotification { $0["params"]?["stateName"] == "DONE" }
            #expect(done["params"]?["statusText"] == "Aborted")
            #expect(try c.call("getReceiveBuffer", ["request": .string(r)]) == ["data": "", "encoding": "base64", "bytes": 0, "done": true])
            #expect(try c.call("getAllResponseHeaders", ["request": .string(r)]) == "")
        }
    }

    /// The old request's answer is held at the origin until after the re-open; then the
    /// origin waits for the old connection to end, after which nothing of the old
    /// transfer can come. A server that still ran it would read the answer and keep the
    /// connection (`waitClosed` fails); one that read it and then closed would have
    /// notified before the sentinel call's reply (replies and notifications are ordered).
    @Test func reopenMidFlightAbortsAndTheOldTransferIsNeverReported() throws {
        try withServer { server, up in
            let origin = try HeldOrigin()
            defer { origin.close() }
            let c = try server.connect()
            let r = try c.start(origin.url)
            _ = try c.waitNotification { $0["params"]?["stateName"] == "SENT" }
            #expect(origin.waitForRequest(), "the old request never reached the origin")
            c.notifications.removeAll()
            try c.call("open", ["request": .string(r), "method": "GET", "url": .string(up.base + "/bytes/7")])
            #expect(try c.statesUntilDone(r) == ["DONE"])
            _ = try c.waitNotification { $0["params"]?["stateName"] == "OPENED" }
            origin.release()
            #expect(origin.waitClosed(), "the old connection was kept after its answer went out")
            _ = try c.call("server.info")
            #expect(c.notifications.isEmpty, "\(c.notifications)")
            try c.call("send", ["request": .string(r)])
            #expect(try c.statesUntilDone(r) == ["SENT", "HEADERS_RECEIVED", "LOADING", "DONE"])
            #expect(try c.readBody(r) == FixturePattern.bytes(count: 7))
            _ = try c.call("server.info")
            #expect(c.notifications.isEmpty, "\(c.notifications)")
        }
    }

    @Test func failuresEndInDoneWithStatusZeroAndAReason() throws {
        try withServer { server, up in
            let c = try server.connect()
            let refused = try c.start("http://127.0.0.1:\(try closedPort())/")
            #expect(try c.statesUntilDone(refused) == ["OPENED", "SENT", "DONE"])
            #expect(try c.call("getStatus", ["request": .string(refused)]) == 0)
            let refusedText = try c.call("getStatusText", ["request": .string(refused)]).stringValue ?? ""
            #expect(refusedText.contains("refused") || refusedText.contains("connect"), "\(refusedText)")

            let slow = try c.start(up.base + "/hang", send: ["timeout": 0.3])
            #expect(try c.statesUntilDone(slow) == ["OPENED", "SENT", "DONE"])
            let timeoutText = try c.call("getStatusText", ["request": .string(slow)]).stringValue ?? ""
            #expect(timeoutText.lowercased().contains("timed out"), "\(timeoutText)")

            let reset = try c.start(up.base + "/reset/100000")
            #expect(try c.statesUntilDone(reset).last == "DONE")
            #expect(try c.call("getStatus", ["request": .string(reset)]) == 0)
            #expect(try c.call("getStatusText", ["request": .string(reset)]) != "")
        }
    }

    @Test func misuseGetsClearErrors() throws {
        try withServer { server, up in
            let c = try server.connect()
            #expect(throws: TestClient.RPCFailure.self) { try c.call("getState", ["request": "nope"]) }
            do { try c.call("getState", ["request": "nope"]) } catch let e as TestClient.RPCFailure {
                #expect(e.reason == "unknown_handle")
            }
            try c.call("create", ["request": "m"])
            do { try c.call("send", ["request": "m"]) } catch let e as TestClient.RPCFailure {
                #expect(e.reason == "invalid_state")
                #expect(e.error["data"]?["stateName"] == "UNSENT")
            }
            do { try c.call("create", ["request": "m"]) } catch let e as TestClient.RPCFailure {
                #expect(e.reason == "already_exists")
            }
            do { try c.call("open", ["request": "m", "method": "GET", "url": "ftp://127.0.0.1/"]) } catch let e as TestClient.RPCFailure {
                #expect(e.code == -32602)
            }
            try c.call("open", ["request": "m", "method": "GET", "url": .string(up.base + "/headers")])
            for (name, value) in [("X-A", "1\r\nInjected: yes"), ("X-B\n", "1"), ("X-C", "a\u{0}b")] {
                do {
                    try c.call("setRequestHeader", ["request": "m", "header": .string(name), "value": .string(value)])
                    Issue.record("header \(name) accepted")
                } catch let e as TestClient.RPCFailure {
                    #expect(e.code == -32602)
                }
            }
        }
    }
}

/// A port nobody listens on: bound, then closed.
func closedPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
    _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
    return Int(UInt16(bigEndian: addr.sin_port))
}
