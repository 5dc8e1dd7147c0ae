import Foundation
import JSON
@testable import Service
import TestSupport

/// A server and an upstream for one test, both stopped at the end; the test fails if
/// the server leaves a handle open.
func withServer(_ tweak: @escaping @Sendable (inout ServerConfig) -> Void = { _ in },
                _ body: (TestServer, Upstream) throws -> Void) throws {
    let upstream = try Upstream()
    defer { upstream.stop() }
    let server = try TestServer(tweak)
    var leftOpen: [String] = []
    do {
        try body(server, upstream)
        leftOpen = server.stop()
    } catch {
        server.stop()
        throw error
    }
    if !leftOpen.isEmpty { throw HandlesLeftOpen(names: leftOpen) }
}

struct HandlesLeftOpen: Error { let names: [String] }

extension TestClient {
    /// create + open + send in one batch; returns the handle.
    @discardableResult
    func start(_ url: String, method: String = "GET", name: String? = nil, open extra: JSONObject = [:],
               send sendParams: JSONObject = [:]) throws -> String {
        let handle = name ?? "r\(UInt32.random(in: 0...UInt32.max))"
        var openParams: JSONObject = ["request": .string(handle), "method": .string(method), "url": .string(url)]
        for m in extra.members { openParams[m.key] = m.value }
        var sp: JSONObject = ["request": .string(handle)]
        for m in sendParams.members { sp[m.key] = m.value }
        let id0 = Int64.random(in: 1_000_000...9_000_000)
        let batch: JSONValue = [
            ["jsonrpc": "2.0", "method": "create", "params": ["request": .string(handle)], "id": .int(id0)],
            ["jsonrpc": "2.0", "method": "open", "params": .object(openParams), "id": .int(id0 + 1)],
            ["jsonrpc": "2.0", "method": "send", "params": .object(sp), "id": .int(id0 + 2)],
        ]
        sendRaw(JSON.encode(batch) + [10])
        while true {
            let m = try readMessage()
            if case .array(let replies) = m {
                for r in replies where r["error"] != nil { throw RPCFailure(error: r["error"]!) }
                return handle
            }
            if m["method"] != nil { notifications.append(m) }
        }
    }
}

extension TestClient {
    /// The `data.reason` of the error `method` answers with; nil when it succeeds.
    func failureReason(_ method: String, _ params: JSONValue = [:]) throws -> String? {
        do {
            try call(method, params)
            return nil
        } catch let e as RPCFailure {
            return e.reason ?? "code \(e.code ?? 0)"
        }
    }
}

extension TestClient {
    /// Waits until the server counts `n` open connections (this one included), so that
    /// a test knows the server has seen another client's close.
    func waitForConnections(_ n: Int, timeout: Double = 10) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if try call("server.info")["connections"]?.int64Value == Int64(n) { return }
            usleep(5000)
        }
        throw Timeout()
    }
}

extension TestClient {
    /// Polls `server.stats` until `transfersInFlight` is `n` (at most 20 s) and returns
    /// the last count.
    func waitForTransfersInFlight(_ n: Int) throws -> Int {
        let deadline = Date().addingTimeInterval(20)
        while true {
            let count = Int(try call("server.stats")["transfersInFlight"]?.int64Value ?? -1)
            if count == n || Date() >= deadline { return count }
            usleep(5_000)
        }
    }
}

extension TestClient {
    /// The handles `list` reports; `list` names no request, so it uses none.
    func listedHandles() throws -> [String] {
        try call("list").arrayValue?.compactMap { $0["request"]?.stringValue } ?? []
    }

    /// Waits until `list` no longer reports any of `handles` (the server released them
    /// on its own), polling with a short pause; throws `Timeout` after `timeout` s.
    func waitUntilReleased(_ handles: Set<String>, timeout: Double = 10) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if handles.isDisjoint(with: try listedHandles()) { return }
            usleep(5000)
        }
        throw Timeout()
    }
}
