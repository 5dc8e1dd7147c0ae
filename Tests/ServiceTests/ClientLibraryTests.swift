import Foundation
import JSON
import Testing
import TestSupport
import XHRPCClient

/// The Swift client library (Sources/XHRPCClient) against a real server and upstream:
/// many calls in flight on one connection, batches, notifications in order, typed
/// errors, the helpers, and the connection's end reaching every waiting call.
@Suite struct ClientLibraryTests {
    func connect(_ server: TestServer) async throws -> XHRPCClient {
        try await XHRPCClient.connect(.unix(path: server.socketPath))
    }

    /// Runs `body` with a client of a fresh server and the fixture upstream; afterwards
    /// the client closes, the upstream stops, and the server must stop with no handle left.
    func withClient(_ body: (XHRPCClient, Upstream) async throws -> Void) async throws {
        let server = try TestServer()
        defer { #expect(server.stop() == []) }
        let upstream = try Upstream()
        defer { upstream.stop() }
        let client = try await connect(server)
        defer { client.close() }
        try await body(client, upstream)
    }

    @Test func manyCallsInFlightOnOneConnection() async throws {
        try await withClient { client, upstream in
            let results = try await withThrowingTaskGroup(of: (Int, FetchResponse).self) { group in
                for i in 0..<40 {
                    group.addTask { (i, try await client.fetch(upstream.url("/bytes/\(1000 + i)?seed=\(i)"))) }
                }
                var out: [Int: FetchResponse] = [:]
                for try await (i, r) in group { out[i] = r }
                return out
            }
            #expect(results.count == 40)
            for (i, r) in results {
                #expect(r.status == 200)
                #expect(r.body == FixturePattern.bytes(count: 1000 + i, seed: i), "fetch \(i)")
            }
        }
    }

    @Test func batchAnswersEachCallInOrderAndErrorsAreTyped() async throws {
        let server = try TestServer()
        defer { #expect(server.stop() == []) }
        let client = try await connect(server)
        defer { client.close() }
        let outcomes = try await client.batch([
            ("create", ["request": "b1"]),
            ("getState", ["request": "b1"]),
            ("getState", ["request": "nope"]),
            ("no.such.method", nil),
        ])
        #expect(outcomes.count == 4)
        #expect(try outcomes[0].get() == ["request": "b1"])
        #expect(try outcomes[1].get()["stateName"] == "UNSENT")
        guard case .failure(let unknown) = outcomes[2], case .failure(let missing) = outcomes[3] else {
            Issue.record("the last two calls must fail: \(outcomes)")
            return
        }
        #expect(unknown.reason == "unknown_handle")
        #expect(unknown.code == -32001)
        #expect(missing.code == -32601)
        do {
            try await client.call("setRequestHeader", ["request": "b1", "header": "Host", "value": "x"])
            Issue.record("Host must be refused")
        } catch let e as XHRPCError {
            #expect(e.code == -32602)
            #expect(e.reason == "forbidden_header")
        }
    }

    @Test func notificationsArriveInOrder() async throws {
        try await withClient { client, upstream in
            for outcome in try await client.batch([
                ("create", ["request": "n1"]),
                ("open", ["request": "n1", "method": "GET", "url": .string(upstream.url("/bytes/100"))]),
                ("send", ["request": "n1"]),
            ]) { _ = try outcome.get() }
            var states: [String] = []
            for await n in client.notifications where n.method == "onStateChange" {
                states.append(n.params["stateName"]?.stringValue ?? "?")
                if states.last == "DONE" { break }
            }
            #expect(states == ["OPENED", "SENT", "HEADERS_RECEIVED", "LOADING", "DONE"])
            #expect(try await client.readBody("n1") == FixturePattern.bytes(count: 100))
        }
    }

    @Test func downloadReportsProgressAndRenamesWhenComplete() async throws {
        try await withClient { client, upstream in
            let dir = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let size = 3 * 1024 * 1024 + 5
            let path = dir + "/body"
            let seen = ProgressLog()
            let result = try await client.download(upstream.url("/bytes/\(size)?seed=3"), to: path) { seen.add($0, $1) }
            #expect(result.status == 200)
            #expect(FileManager.default.contents(atPath: path).map { [UInt8]($0) } == FixturePattern.bytes(count: size, seed: 3))
            #expect(!FileManager.default.fileExists(atPath: path + ".part"))
            let reports = seen.reports
            #expect(!reports.isEmpty)
            #expect(reports.last.map { $0.0 == Int64(size) && $0.1 == Int64(size) } == true, "\(reports.suffix(2))")
            #expect(zip(reports, reports.dropFirst()).allSatisfy { $0.0 <= $1.0 }, "received only grows")
        }
    }

    @Test func theConnectionsEndReachesEveryWaitingCall() async throws {
        do {
            _ = try await XHRPCClient.connect(.unix(path: "/nonexistent/xhrpc.sock"))
            Issue.record("connecting to a missing socket must fail")
        } catch let e as XHRPCError {
            #expect(e.code == nil)
        }
        let server = try TestServer()
        defer { #expect(server.stop() == []) }
        let upstream = try Upstream()
        defer { upstream.stop() }
        let client = try await connect(server)
        async let slow = client.fetch(upstream.url("/hang"))
        // The fetch is in flight once the server answers a call sent after it.
        _ = try await client.call("server.info")
        client.close()
        do {
            _ = try await slow
            Issue.record("a call waiting when the connection closes must fail")
        } catch let e as XHRPCError {
            #expect(e.code == nil, "\(e)")
        }
    }
}

/// Progress reports, collected from the download's callback.
final class ProgressLog: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [(Int64, Int64)] = []
    func add(_ received: Int64, _ total: Int64) {
        lock.lock()
        items.append((received, total))
        lock.unlock()
    }
    var reports: [(Int64, Int64)] {
        lock.lock()
        defer { lock.unlock() }
        return items
    }
}
