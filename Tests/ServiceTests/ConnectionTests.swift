import Foundation
import JSON
import Testing
import TestSupport

@Suite(.serialized) struct ConnectionTests {
    @Test func requestsEndWithTheirConnection() throws {
        try withServer { server, up in
            var c: TestClient? = try server.connect()
            _ = try c!.start(up.base + "/bytes/\(32 << 20)")
            _ = try c!.waitNotification { $0["params"]?["stateName"] == "LOADING" }
            c = nil  // vanishes mid-download
            let other = try server.connect()
            let deadline = Date().addingTimeInterval(10)
            while try other.call("list") != [], Date() < deadline { usleep(10_000) }
            #expect(try other.call("list") == [])
        }
    }

    /// Past a principal's transfer limit sends are refused (Tests/Integration/test_principals.py);
    /// here the limit admits all 500 at once, to load one connection.
    @Test func fiveHundredRequestsOnOneConnection() throws {
        try withServer({ $0.limits.transfers = 500 }) { server, up in
            let c = try server.connect()
            var batch: [JSONValue] = []
            for i in 0..<500 {
                let h = JSONValue.string("c\(i)")
                batch += [
                    ["jsonrpc": "2.0", "method": "create", "params": ["request": h]],
                    ["jsonrpc": "2.0", "method": "open", "params": ["request": h, "method": "GET", "url": .string(up.base + "/bytes/\(1000 + i)?seed=\(i % 7)"), "subscribe": false]],
                    ["jsonrpc": "2.0", "method": "send", "params": ["request": h]],
                ]
            }
            c.sendRaw(JSON.encode(.array(batch)) + [10])
            for i in 0..<500 {
                let body = try c.readBody("c\(i)", timeout: 60)
                #expect(body == FixturePattern.bytes(count: 1000 + i, seed: i % 7), "request \(i)")
            }
        }
    }

    @Test func fiftyConnectionsAtOnce() throws {
        try withServer { server, up in
            let clients = try (0..<50).map { _ in try server.connect() }
            let handles = try clients.enumerated().map { i, c in try c.start(up.base + "/bytes/\(i * 100)") }
            for (i, c) in clients.enumerated() {
                #expect(try c.readBody(handles[i]) == FixturePattern.bytes(count: i * 100))
            }
            #expect(try clients[0].call("server.info")["connections"] == 50)
        }
    }

    @Test func listShowsTheCallersRequestsWithoutCredentials() throws {
        try withServer { server, up in
            let c = try server.connect()
            try c.call("create", ["request": "l1"])
            try c.call("open", ["request": "l1", "method": "GET", "url": .string("http://user:secret@127.0.0.1:\(up.port)/x"), "password": "pw"])
            let list = try c.call("list")
            #expect(list == [["request": "l1", "kind": "request", "state": 1, "stateName": "OPENED", "method": "GET",
                              "url": .string("http://127.0.0.1:\(up.port)/x"), "status": 0]])
            try c.call("release", ["request": "l1"])
            #expect(try c.call("list") == [])
        }
    }
}
